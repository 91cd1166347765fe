/**
 * The MCP tools (docs/contract.md §9): `list_integrations`, `<provider>_api` and
 * `integration_status`, shown and allowed per credential — a capability's providers and access,
 * or every configured provider for an API token. A provider call is the proxy's own
 * (`proxyCall`: path rules, refresh, classification), never a client of its own here.
 */
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { AuditActor } from '../ground/work.ts';
import { recordAudit } from '../audit/audit.ts';
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { capabilityAccess } from '../identity/capabilities.ts';
import { checkedStatus } from '../integrations/checked-status.ts';
import { currentAccounts, listIntegrationSummaries } from '../integrations/integrations.ts';
import type { ConfiguredProvider } from '../integrations/providers/registry.ts';
import { restIsWrite } from '../integrations/providers/types.ts';
import { proxyCall, proxySegments, proxyWrites, takeEndUser } from '../integrations/proxy.ts';
import { effectiveStatus } from '../integrations/status.ts';
import { toAnswer } from '../integrations/tokens/policy.ts';
import type { Services } from '../services.ts';
import { providerGuide } from './tool-text.ts';

/** A provider the caller may reach, and how. */
interface Reach {
  provider: ConfiguredProvider;
  access: 'read' | 'write';
}

/** What one MCP request's tools act for: the caller, and the audit actor of its calls. */
export interface ToolCaller {
  principal: Principal;
  actor: AuditActor;
}

/** The configured providers the caller reaches: a capability's own, or every one for an API token (it acts as admin). */
function reachable(services: Services, principal: Principal): Reach[] {
  const grant = principal.capability;
  if (!grant) return services.providers.list().map((provider) => ({ provider, access: 'write' as const }));
  return [...grant.providers].flatMap(([id, access]) => {
    const provider = services.providers.get(id);
    return provider ? [{ provider, access }] : [];
  });
}

const WRITE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * The HTTP methods a tool offers: every one to write; to read, GET and HEAD — and POST too for an
 * RPC-style API, whose definition tells reads from writes by more than the method (Slack's
 * `conversations.list`, a Linear query). Each call is still judged by the definition (`isWrite`).
 */
function methodsFor(reach: Reach): string[] {
  if (reach.access === 'write') return WRITE_METHODS;
  return reach.provider.definition.isWrite === restIsWrite ? ['GET', 'HEAD'] : ['GET', 'HEAD', 'POST'];
}

/** `github_api`, `slack_api`, …: one tool per provider. */
export function apiToolName(providerId: string): string {
  return `${providerId}_api`;
}

/** The tools the caller may use, as `tools/list` shows them. */
export function listTools(services: Services, principal: Principal): Tool[] {
  const reach = reachable(services, principal);
  if (reach.length === 0) return [];
  const providers = reach.map((r) => r.provider.id);
  const narrowed = principal.capability?.endUserId ?? null;
  const endUser: Record<string, object> = narrowed === null ? { endUser: { type: 'string', description: "An end user's id: their integration instead of the organization's own" } } : {};
  const tools: Tool[] = [
    {
      name: 'list_integrations',
      description: `Lists the connected accounts this credential can use (${providers.join(', ')}): each integration's id, provider, status (connected, expired, invalid, warning), the provider account's username and non-secret metadata. Never returns a token. Call it first to see what is connected and healthy.`,
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      annotations: { title: 'List connected integrations', readOnlyHint: true, openWorldHint: false },
    },
    {
      name: 'integration_status',
      description: `Reports whether a provider's integration works: connected or not, the token's validity and expiry, when it was last checked, and what a person must do to fix it (reconnect, refresh, configure). Use it when a call failed with TOKEN_VALIDATION_FAILED or to check before a long task.`,
      inputSchema: { type: 'object', properties: { provider: { type: 'string', enum: providers }, ...endUser }, required: ['provider'], additionalProperties: false },
      annotations: { title: 'Integration status', readOnlyHint: true, openWorldHint: false },
    },
  ];
  for (const r of reach) {
    const methods = methodsFor(r);
    tools.push({
      name: apiToolName(r.provider.id),
      description: providerGuide(r.provider, r.access, methods, narrowed),
      inputSchema: {
        type: 'object',
        properties: {
          method: { type: 'string', enum: methods, description: r.access === 'read' ? 'Read-only: this credential may not write' : 'HTTP method' },
          path: { type: 'string', minLength: 1, maxLength: 2048, description: `Path under the API base ${r.provider.context.endpoints.apiUrl}, e.g. /user` },
          query: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] }, description: 'Query parameters' },
          body: { description: 'JSON body (not for GET or HEAD)' },
          maxWait: { type: 'integer', minimum: 0, maximum: 60, description: "Seconds to wait for the provider's rate limit to reset, or to retry a failed read, before giving up (default 0)" },
        },
        required: ['method', 'path'],
        additionalProperties: false,
      },
      outputSchema: { type: 'object', properties: { status: { type: 'integer' }, body: {} }, required: ['status'] },
      annotations: { title: `${r.provider.displayName} API${r.access === 'read' ? ' (read-only)' : ''}`, readOnlyHint: r.access === 'read', destructiveHint: r.access === 'write', openWorldHint: true },
    });
  }
  return tools;
}

/**
 * A failure as the model sees it: a tool error naming the §2 code (`TOKEN_VALIDATION_FAILED`,
 * `PROVIDER_RATE_LIMITED` with its `retryAfter`, …). Anything else is logged and becomes a bare
 * protocol error: the SDK would otherwise send its message, which may quote a failed query.
 */
function toolError(services: Services, error: unknown): CallToolResult {
  const answer = toAnswer(error);
  if (!(answer instanceof AppError) || answer.code === 'INTERNAL') {
    services.logger.error({ err: error }, 'MCP tool failed');
    throw new Error('Internal error');
  }
  const retryAfter = answer.headers?.['retry-after'];
  const text = JSON.stringify({ code: answer.code, message: answer.message, ...(retryAfter ? { retryAfter: Number(retryAfter) } : {}) });
  return { isError: true, content: [{ type: 'text', text }] };
}

function invalid(path: string, message: string): AppError {
  return new AppError('INVALID_INPUT', { message: `${path} ${message}`, details: [{ path, message }] });
}

/** Runs one tool; a refusal or a provider failure is a tool error, never a protocol error. */
export async function callTool(services: Services, caller: ToolCaller, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  try {
    const reach = reachable(services, caller.principal);
    if (name === 'list_integrations') return await listIntegrationsTool(services, caller.principal, reach);
    if (name === 'integration_status') return await statusTool(services, caller, reach, args);
    const api = reach.find((r) => apiToolName(r.provider.id) === name);
    if (api) return await apiTool(services, caller, api, args);
    throw new AppError('NOT_FOUND', { message: `No tool ${name.slice(0, 80)} for this credential` });
  } catch (error) {
    return toolError(services, error);
  }
}

/** The end user a call means: the capability's own when it is narrowed, else the one asked (null: the organization's own). */
function endUserOf(principal: Principal, provider: string, writes: boolean, asked: string | null): string | null {
  return principal.capability ? capabilityAccess(principal.capability, provider, writes, asked) : asked;
}

async function listIntegrationsTool(services: Services, principal: Principal, reach: Reach[]): Promise<CallToolResult> {
  const narrowed = principal.capability?.endUserId;
  const rows = (await listIntegrationSummaries(services.db, principal.organizationId, narrowed ? { endUserId: narrowed } : {})).filter((row) => reach.some((r) => r.provider.id === row.provider));
  const accounts = new Map<string, Awaited<ReturnType<typeof currentAccounts>>>();
  for (const key of new Set(rows.map((row) => row.endUser?.id ?? null))) accounts.set(key ?? '', await currentAccounts(services, principal.organizationId, key));
  const integrations = rows.map((row) => ({
    id: row.id,
    provider: row.provider,
    status: effectiveStatus(row),
    account: accounts.get(row.endUser?.id ?? '')?.get(row.provider)?.username ?? null,
    endUser: row.endUser?.id ?? null,
    metadata: row.metadata,
  }));
  return { content: [{ type: 'text', text: JSON.stringify({ integrations }) }], structuredContent: { integrations } };
}

async function statusTool(services: Services, caller: ToolCaller, reach: Reach[], args: Record<string, unknown>): Promise<CallToolResult> {
  const r = reach.find((candidate) => candidate.provider.id === args.provider);
  if (!r) throw invalid('provider', 'must be one of the providers this credential reaches');
  const endUserId = typeof args.endUser === 'string' ? args.endUser : null;
  const status = await checkedStatus(services, { db: services.db, actor: caller.actor }, { provider: r.provider.id, endUserId });
  return { content: [{ type: 'text', text: JSON.stringify(status) }], structuredContent: status as unknown as Record<string, unknown> };
}

/** The query of a tool call as the proxy reads a raw query string (`endUser` included, taken out by `takeEndUser`). */
function queryString(query: unknown): string {
  if (query === undefined) return '';
  if (query === null || typeof query !== 'object' || Array.isArray(query)) throw invalid('query', 'must be an object of parameters');
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (!['string', 'number', 'boolean'].includes(typeof value)) throw invalid(`query.${name.slice(0, 64)}`, 'must be a string, number or boolean');
    params.append(name, String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

async function apiTool(services: Services, caller: ToolCaller, reach: Reach, args: Record<string, unknown>): Promise<CallToolResult> {
  const { principal } = caller;
  const provider = reach.provider.id;
  const method = typeof args.method === 'string' ? args.method.toUpperCase() : '';
  if (!WRITE_METHODS.includes(method)) throw invalid('method', `must be one of ${WRITE_METHODS.join(', ')}`);
  if (typeof args.path !== 'string' || args.path.length > 2048) throw invalid('path', 'must be a path under the API base');
  const maxWait = args.maxWait ?? 0;
  if (typeof maxWait !== 'number' || !Number.isInteger(maxWait) || maxWait < 0 || maxWait > 60) throw invalid('maxWait', 'must be whole seconds from 0 to 60');
  const segments = proxySegments(args.path.replace(/^\/+/, ''));
  const { endUserId: asked, forwarded: query } = takeEndUser(queryString(args.query));
  const hasBody = method !== 'GET' && method !== 'HEAD' && args.body !== undefined;
  const writes = proxyWrites(services.providers, provider, method, segments, hasBody ? args.body : undefined);
  // The same checks as the proxy route's: a capability's own narrow one, an API token acts as admin.
  const endUserId = endUserOf(principal, provider, writes, asked);
  const answer = await proxyCall(services, {
    organizationId: principal.organizationId,
    provider,
    endUserId,
    method,
    segments,
    query,
    headers: { accept: 'application/json', ...(hasBody ? { 'content-type': 'application/json' } : {}) },
    ...(hasBody ? { body: JSON.stringify(args.body) } : {}),
    actor: caller.actor,
    maxWaitSeconds: maxWait,
  });
  await recordAudit(services.db, caller.actor, {
    organizationId: principal.organizationId,
    action: 'mcp.tool_call',
    detail: { tool: apiToolName(provider), method, path: segments.join('/').slice(0, 200), status: answer.status, ...(principal.capability ? { agent: principal.capability.agent } : {}) },
  });
  const text = answer.body.toString('utf8');
  let body: unknown = text;
  if (/json/i.test(answer.headers.get('content-type') ?? '')) {
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON after all: the text as it came.
    }
  }
  const result = { status: answer.status, body };
  return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
}
