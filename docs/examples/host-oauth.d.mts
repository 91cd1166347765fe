/** Types of host-oauth.mjs, for the test that runs it (test/mcp-oauth.test.ts). */
export function signInAndCall(options: { tesseraUrl: string; open: (url: URL) => unknown; port?: number }): Promise<{ tools: string[]; integrations: unknown; scope: string | undefined }>;
