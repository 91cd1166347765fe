/**
 * Organizations over REST (docs/contract.md §3, §5d): a user creates one and owns it; a product's
 * service token creates, finds (by its `externalId`, the product's key), renames, links and deletes its customers'
 * organizations. Deleting one offboards it: everything it holds goes in one transaction, and
 * its grants are revoked at their providers after the commit.
 */
import { Type } from 'typebox';
import { AppError } from '../ground/errors.ts';
import { NameSchema } from '../ground/names.ts';
import type { TypedFastify } from '../http/typed.ts';
import type { UnitOfWork } from '../ground/work.ts';
import { unitOfWork } from '../http/unit-of-work.ts';
import { deleteOrganizationIntegrations } from '../integrations/delete.ts';
import { PRODUCT_ID_PATTERN } from '../lib/ids.ts';
import type { Services } from '../services.ts';
import { deleteOrganization, listOrganizations, type OrganizationListed, organizationFor, updateOrganization } from './manage.ts';
import { createOrganization, creatorOf } from './organizations.ts';

const ExternalId = Type.String({ minLength: 1, maxLength: 128, pattern: PRODUCT_ID_PATTERN, description: "The product's key for its customer: 1–128 printable characters, unique across the deployment, matched exactly; set only by a service token or a system administrator" });
const Name = NameSchema({ minLength: 1, maxLength: 100, description: '1–100 characters (after trimming), no control or bidirectional formatting character' });
const Organization = Type.Object({ id: Type.String(), name: Type.String(), externalId: Type.Union([Type.String(), Type.Null()]) });
const ListedOrganization = Type.Object({ id: Type.String(), name: Type.String(), externalId: Type.Union([Type.String(), Type.Null()]), createdAt: Type.String({ format: 'date-time' }) });
const Count = Type.Integer({ minimum: 0 });
const Health = Type.Object(
  { connected: Count, warning: Count, expired: Count, invalid: Count },
  { description: "How many of its integrations (its own and its end users') are in each status" },
);
const IdParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

function listedView(organization: OrganizationListed) {
  return { id: organization.id, name: organization.name, externalId: organization.externalId, createdAt: organization.createdAt.toISOString() };
}

/** Every route of organizations as a whole. */
export function organizationRoutes(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/organizations',
    {
      config: { auth: 'authenticated', errors: ['CONFLICT'] },
      schema: {
        summary: "Create an organization: a user becomes its owner; one a service token creates has no member until someone is invited. externalId, the product's key, only from a service token or a system administrator",
        tags: ['organizations'],
        body: Type.Object({ name: Name, externalId: Type.Optional(ExternalId) }, { additionalProperties: false }),
        response: { 201: Type.Object({ success: Type.Literal(true), organization: Organization }) },
      },
    },
    async (request, reply) => {
      const { name, externalId } = request.body;
      const work = await unitOfWork(request, services);
      // A person's quota binds a person only (createOrganization).
      const organization = await createOrganization(work, { ...creatorOf(work.actor.principal), name, externalId, quota: services.config.limits.organizationsPerUser });
      reply.code(201);
      return { success: true as const, organization };
    },
  );

  app.get(
    '/v1/organizations',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "Every organization, newest first, a page at a time, each with its integrations' health (service tokens, system administrators)",
        tags: ['organizations'],
        querystring: Type.Object({
          q: Type.Optional(Type.String({ maxLength: 128, description: 'Only those whose name or externalId contains this (any letter case)' })),
          externalId: Type.Optional(ExternalId),
          first: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, 1–100 (default 20)' })),
          after: Type.Optional(Type.String({ maxLength: 64, description: 'The endCursor of the page before' })),
        }),
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            organizations: Type.Array(Type.Object({ ...ListedOrganization.properties, health: Health })),
            pageInfo: Type.Object({ endCursor: Type.Union([Type.String(), Type.Null()]), hasNextPage: Type.Boolean() }),
          }),
        },
      },
    },
    async (request) => {
      const { first = 20, after, externalId, q } = request.query;
      const page = await listOrganizations(await unitOfWork(request, services), { first, ...(after === undefined ? {} : { after }), ...(externalId === undefined ? {} : { externalId }), ...(q === undefined ? {} : { q }) });
      return { success: true as const, organizations: page.organizations.map((organization) => ({ ...listedView(organization), health: organization.health })), pageInfo: page.pageInfo };
    },
  );

  app.get(
    '/v1/organizations/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'An organization (a member, a system administrator or a service token)',
        tags: ['organizations'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true), organization: ListedOrganization }) },
      },
    },
    async (request) => {
      const organization = await organizationFor(await unitOfWork(request, services), request.params.id, 'member', { systemAdmin: true });
      return { success: true as const, organization: listedView(organization) };
    },
  );

  app.patch(
    '/v1/organizations/:id',
    {
      config: { auth: 'authenticated', errors: ['CONFLICT'] },
      schema: {
        summary: "Rename an organization (its owner, a system administrator or a service token) or set its externalId, the product's key (a system administrator or a service token)",
        tags: ['organizations'],
        params: IdParams,
        body: Type.Object({ name: Type.Optional(Name), externalId: Type.Optional(Type.Union([ExternalId, Type.Null()])) }, { additionalProperties: false }),
        response: { 200: Type.Object({ success: Type.Literal(true), organization: ListedOrganization }) },
      },
    },
    async (request) => {
      const organization = await updateOrganization(await unitOfWork(request, services), { id: request.params.id, ...request.body });
      return { success: true as const, organization: listedView(organization) };
    },
  );

  app.delete(
    '/v1/organizations/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Offboard an organization (its owner, or a service token): everything it holds is deleted, its grants revoked at their providers',
        tags: ['organizations'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true), deleted: Type.Object({ integrations: Type.Integer() }) }) },
      },
    },
    async (request) => {
      const work = await unitOfWork(request, services);
      const deleted = await offboard(services, work, request.params.id);
      return { success: true as const, deleted };
    },
  );
}

/**
 * Offboards organization `id` in `work`'s one transaction (decision 130): its integrations with
 * their secrets and grants to revoke, then the organization with everything else it holds.
 */
async function offboard(services: Services, work: UnitOfWork, id: string): Promise<{ integrations: number }> {
  if (work.actor.principal?.impersonatorId) throw new AppError('FORBIDDEN', { message: 'Not allowed while impersonating' });
  const { principal: _principal, ...organization } = await organizationFor(work, id, 'owner', { lock: true });
  const deleted = { integrations: await deleteOrganizationIntegrations(services, work, id) };
  await deleteOrganization(work, organization, deleted);
  return deleted;
}
