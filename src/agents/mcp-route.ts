/**
 * `POST /mcp` (docs/contract.md §9): the Model Context Protocol over Streamable HTTP with the
 * official SDK, stateless — a server and transport per request, JSON answers, no session. It is
 * an authenticated route like any other (the pipeline checks the capability or API token and
 * rate-limits it); the SDK only speaks the protocol, and the tools call the proxy (tools.ts).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import type { TypedFastify } from '../http/typed.ts';
import { requestActor } from '../http/unit-of-work.ts';
import type { Services } from '../services.ts';
import { agentUrls } from './oauth-routes.ts';
import { callTool, listTools, type ToolCaller } from './tools.ts';
import { CREDENTIAL_KINDS } from '../identity/credential-kinds.ts';

/**
 * What a JSON-RPC batch gets (docs/contract.md §9): the protocol versions this route speaks have
 * none, and one request is one message — at most one tool call, charged once by the pipeline's
 * rate limits (decision 239).
 */
const BATCH_REFUSED = { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batches are not supported' } } as const;

/** The headers of the SDK's answer that reach the client. */
const PASSED_HEADERS = ['content-type', 'mcp-protocol-version'];

/** A capability, or an API token (docs/contract.md §9); a person's session or PAT and a service token are refused. */
function mcpCaller(request: FastifyRequest): Principal {
  const principal = request.ctx.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  if (!CREDENTIAL_KINDS[principal.kind].mcp) throw new AppError('FORBIDDEN', { message: 'The MCP endpoint takes an agent capability or an API token' });
  return principal;
}

/**
 * The servers' one JSON Schema validator: without it every request's server builds its own Ajv
 * (a twentieth of a tool call's time in a profile, docs/benchmarks.md). It keeps no caller's data.
 */
const schemaValidator = new AjvJsonSchemaValidator();

/** One request's MCP server: the tools this caller may use, nothing kept after it. */
function mcpServer(services: Services, caller: ToolCaller): Server {
  const server = new Server({ name: 'tessera', version: '1' }, { capabilities: { tools: {} }, jsonSchemaValidator: schemaValidator, instructions: 'Tessera holds OAuth connections to providers (GitHub, Slack, …) for an organization. list_integrations shows what is connected; <provider>_api calls that provider\'s API as the connected account.' });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listTools(services, caller.principal) }));
  server.setRequestHandler(CallToolRequestSchema, (call) => callTool(services, caller, call.params.name, call.params.arguments ?? {}));
  return server;
}

/** `POST /mcp`, and the `GET /mcp` a client may try for a stream this stateless server does not offer (405). */
export function mcpRoutes(app: TypedFastify, services: Services): void {
  const urls = agentUrls(services.config.server.publicUrl);
  const challenge = `Bearer resource_metadata="${urls.resourceMetadata}"`;
  app.post(
    '/mcp',
    {
      config: { auth: 'authenticated', credentials: 'header', errors: [] },
      schema: {
        summary: 'The Model Context Protocol (Streamable HTTP, stateless): tools list_integrations, <provider>_api, integration_status',
        tags: ['agents'],
        body: Type.Unknown({ description: 'A JSON-RPC message of MCP (protocol version 2025-06-18 or later)' }),
        response: {
          200: { description: 'The JSON-RPC answer' },
          202: { type: 'null', description: 'A notification, accepted: no body' },
          400: Type.Object(
            { jsonrpc: Type.Literal('2.0'), id: Type.Union([Type.String(), Type.Number(), Type.Null()]), error: Type.Object({ code: Type.Integer(), message: Type.String() }) },
            { description: 'A message that is not MCP, or a JSON-RPC batch (none in these protocol versions): a JSON-RPC error' },
          ),
        },
      },
      // Every 401 points the client at the metadata that says where a capability comes from (RFC 9728 §5.1).
      onSend: async (_request, reply, payload) => {
        if (reply.statusCode === 401) reply.header('www-authenticate', challenge);
        return payload;
      },
    },
    async (request, reply) => {
      const principal = mcpCaller(request);
      // Refused before the SDK sees it, which would run every message of an array, tool calls included.
      if (Array.isArray(request.body)) {
        reply.code(400);
        return BATCH_REFUSED;
      }
      const server = mcpServer(services, { principal, actor: requestActor(request) });
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      try {
        // Every answer here is JSON (no streams), whatever else the client would accept: the transport's Accept rule has nothing to protect.
        const headers = new Headers({ accept: 'application/json, text/event-stream', 'content-type': 'application/json' });
        const version = request.headers['mcp-protocol-version'];
        if (typeof version === 'string') headers.set('mcp-protocol-version', version);
        const answer = await transport.handleRequest(new Request(urls.mcp, { method: 'POST', headers, body: JSON.stringify(request.body ?? null) }), { parsedBody: request.body });
        reply.code(answer.status as 200);
        for (const name of PASSED_HEADERS) {
          const value = answer.headers.get(name);
          if (value !== null) reply.header(name, value);
        }
        // An accepted notification has no body: the answer stays typed JSON like every other.
        return await answer.text();
      } finally {
        await server.close();
      }
    },
  );

  app.get(
    '/mcp',
    { config: { auth: 'unauthenticated', errors: ['METHOD_NOT_ALLOWED'] }, schema: { hide: true } },
    async () => {
      // Stateless: no stream to open. The MCP transport wants a 405 here; its body is §2's, like `GET /query`'s.
      throw new AppError('METHOD_NOT_ALLOWED', { message: 'This MCP server is stateless: POST each message to /mcp', headers: { allow: 'POST' } });
    },
  );
}
