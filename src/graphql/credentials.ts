/**
 * GraphQL for credentials (docs/contract.md §6, §5d): personal access tokens, API tokens and
 * service tokens (listed without their values; created ones carry `token` once), and the
 * Session a switch returns.
 */
import { AppError } from '../ground/errors.ts';
import {
  createApiToken,
  createPersonalAccessToken,
  listApiTokens,
  listPersonalAccessTokens,
  type PersonalAccessTokenInfo,
  revokeApiToken,
  revokePersonalAccessToken,
  type TokenInfo,
} from '../identity/access-tokens.ts';
import { createServiceToken, listServiceTokens, revokeServiceToken } from '../identity/service-tokens.ts';
import { type Builder, type MutationFields, principalOf, type QueryFields, workOf } from './context.ts';

/** An optional ISO 8601 date-time argument, or 400 naming `path`. */
function parseDate(value: string | null | undefined, path: string): Date | null {
  if (value === null || value === undefined) return null;
  const date = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(value) ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime()) || date.getUTCFullYear() > 9999) {
    throw new AppError('INVALID_INPUT', { message: `${path} must be an ISO 8601 date-time`, details: [{ path, message: 'must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z' }] });
  }
  return date;
}

const iso = (date: Date | null | undefined) => date?.toISOString() ?? null;

interface SessionShape {
  accessToken: string;
  tokenType: string;
  expiresAt: string;
  organizationId: string;
}

/** Registers Token, the PAT and API-token types and Session; schema.ts calls it where they belong in the SDL's order. */
export function credentialTypes(builder: Builder) {
  const TokenInterface = builder.interfaceRef<TokenInfo>('Token').implement({
    description: 'A credential as listed: never its value',
    fields: (t) => ({
      id: t.exposeID('id'),
      name: t.exposeString('name'),
      display: t.exposeString('display', { description: 'Prefix and last four characters' }),
      expiresAt: t.string({ nullable: true, resolve: (token) => iso(token.expiresAt) }),
      lastUsedAt: t.string({ nullable: true, resolve: (token) => iso(token.lastUsedAt) }),
      revokedAt: t.string({ nullable: true, resolve: (token) => iso(token.revokedAt) }),
      createdAt: t.string({ resolve: (token) => token.createdAt.toISOString() }),
    }),
  });

  const PatRef = builder.objectRef<PersonalAccessTokenInfo>('PersonalAccessToken').implement({
    interfaces: [TokenInterface],
    fields: (t) => ({ organizationIds: t.stringList({ resolve: (token) => token.organizationIds }) }),
  });

  const CreatedPatRef = builder.objectRef<PersonalAccessTokenInfo & { token: string }>('CreatedPersonalAccessToken').implement({
    description: 'A new personal access token: `token` is its value, readable this once only',
    interfaces: [TokenInterface],
    fields: (t) => ({ token: t.exposeString('token'), organizationIds: t.stringList({ resolve: (token) => token.organizationIds }) }),
  });

  const ApiTokenRef = builder.objectRef<TokenInfo>('APIToken').implement({ interfaces: [TokenInterface], fields: () => ({}) });

  const CreatedApiTokenRef = builder.objectRef<TokenInfo & { token: string }>('CreatedAPIToken').implement({
    description: 'A new API token: `token` is its value, readable this once only',
    interfaces: [TokenInterface],
    fields: (t) => ({ token: t.exposeString('token') }),
  });

  const ServiceTokenRef = builder.objectRef<TokenInfo>('ServiceToken').implement({
    description: "A product backend's credential across every organization (system administrators manage them)",
    interfaces: [TokenInterface],
    fields: () => ({}),
  });

  const CreatedServiceTokenRef = builder.objectRef<TokenInfo & { token: string }>('CreatedServiceToken').implement({
    description: 'A new service token: `token` is its value, readable this once only',
    interfaces: [TokenInterface],
    fields: (t) => ({ token: t.exposeString('token') }),
  });

  const SessionRef = builder.objectRef<SessionShape>('Session').implement({
    description: 'A session token of the same session, bound to the organization switched to',
    fields: (t) => ({
      accessToken: t.exposeString('accessToken'),
      tokenType: t.exposeString('tokenType'),
      expiresAt: t.exposeString('expiresAt'),
      organizationId: t.exposeString('organizationId'),
    }),
  });

  return { PatRef, CreatedPatRef, ApiTokenRef, CreatedApiTokenRef, ServiceTokenRef, CreatedServiceTokenRef, SessionRef };
}

/** The refs `credentialTypes` registered. */
export type CredentialTypes = ReturnType<typeof credentialTypes>;

/** Query fields: personalAccessTokens, apiTokens, serviceTokens. */
export function credentialQueries(t: QueryFields, { PatRef, ApiTokenRef, ServiceTokenRef }: CredentialTypes) {
  return {
    personalAccessTokens: t.field({
      type: [PatRef],
      resolve: async (_root, _args, ctx) => listPersonalAccessTokens(await workOf(ctx)),
    }),
    apiTokens: t.field({
      type: [ApiTokenRef],
      resolve: async (_root, _args, ctx) => listApiTokens(await workOf(ctx), { organizationId: principalOf(ctx).organizationId }),
    }),
    serviceTokens: t.field({
      type: [ServiceTokenRef],
      description: 'Every service token, newest first (system administrators)',
      resolve: async (_root, _args, ctx) => listServiceTokens(await workOf(ctx)),
    }),
  };
}

/** Mutation fields: create and revoke personal access tokens, API tokens and service tokens. */
export function credentialMutations(t: MutationFields, { PatRef, CreatedPatRef, ApiTokenRef, CreatedApiTokenRef, ServiceTokenRef, CreatedServiceTokenRef }: CredentialTypes) {
  return {
    createPersonalAccessToken: t.field({
      type: CreatedPatRef,
      args: {
        name: t.arg.string({ required: true }),
        expiresAt: t.arg.string({ required: false }),
        organizationIds: t.arg.idList({ required: false }),
      },
      resolve: async (_root, args, ctx) => {
        return createPersonalAccessToken(
          await workOf(ctx),
          { name: args.name, expiresAt: parseDate(args.expiresAt, 'expiresAt'), ...(args.organizationIds ? { organizationIds: args.organizationIds.map(String) } : {}) },
        );
      },
    }),
    revokePersonalAccessToken: t.field({
      type: PatRef,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => revokePersonalAccessToken(await workOf(ctx), { id: String(args.id) }),
    }),
    createAPIToken: t.field({
      type: CreatedApiTokenRef,
      description: 'Creates an API token for organizationId (default: the current organization), of which the signed-in caller is an owner or admin',
      args: { name: t.arg.string({ required: true }), expiresAt: t.arg.string({ required: false }), organizationId: t.arg.id({ required: false }) },
      resolve: async (_root, args, ctx) =>
        createApiToken(await workOf(ctx), {
          name: args.name,
          expiresAt: parseDate(args.expiresAt, 'expiresAt'),
          organizationId: args.organizationId == null ? null : String(args.organizationId),
          quota: ctx.services.config.limits.apiTokens,
        }),
    }),
    revokeAPIToken: t.field({
      type: ApiTokenRef,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => revokeApiToken(await workOf(ctx), { organizationId: principalOf(ctx).organizationId, id: String(args.id) }),
    }),
    createServiceToken: t.field({
      type: CreatedServiceTokenRef,
      description: "Creates a service token (a system administrator's own session or PAT): one credential for a product's backend across every organization",
      args: { name: t.arg.string({ required: true }), expiresAt: t.arg.string({ required: false }) },
      resolve: async (_root, args, ctx) => createServiceToken(await workOf(ctx), { name: args.name, expiresAt: parseDate(args.expiresAt, 'expiresAt') }),
    }),
    revokeServiceToken: t.field({
      type: ServiceTokenRef,
      description: 'Revokes a service token (system administrators); the connect sessions it minted are revoked with it',
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => revokeServiceToken(await workOf(ctx), { id: String(args.id) }),
    }),
  };
}
