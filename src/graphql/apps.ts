/**
 * GraphQL for apps (docs/contract.md §5e): `apps`, `createApp`, `updateApp`, `deleteApp`, and the
 * `App` type — never a secret field. Resolvers call the use cases the REST routes call.
 */
import { type AppChange, type AppView, createApp, deleteApp, listApps, type NewApp, updateApp } from '../integrations/apps/store.ts';
import { type Builder, type MutationFields, type QueryFields, workOf } from './context.ts';

/** A nullable argument read as "not given" when null (the fields a change cannot clear). */
const given = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value);

/** Registers App and the inputs of its mutations; schema.ts calls it where they belong in the SDL's order. */
export function appTypes(builder: Builder) {
  const AppRef = builder.objectRef<AppView>('App').implement({
    description: "An OAuth app (docs/contract.md §5e): one of the deployment's, or one of the organization's own. Never a secret",
    fields: (t) => ({
      id: t.exposeID('id'),
      provider: t.exposeString('provider'),
      owner: t.exposeString('owner', { description: '"deployment" or "organization"' }),
      name: t.exposeString('name'),
      clientId: t.exposeString('clientId'),
      scopes: t.stringList({ nullable: true, description: "The scopes it may request; null: the provider's configured set", resolve: (app) => app.scopes }),
      default: t.exposeBoolean('default', { description: "This organization's default app of its provider" }),
      redirectUri: t.exposeString('redirectUri', { description: 'The callback to register at the provider' }),
      eventsUrl: t.string({ nullable: true, description: "Where the provider sends this app's events; null for a provider without events", resolve: (app) => app.eventsUrl }),
      hasEventsSecret: t.exposeBoolean('hasEventsSecret'),
      createdAt: t.exposeString('createdAt'),
      updatedAt: t.exposeString('updatedAt'),
    }),
  });

  const CreateAppInput = builder.inputType('CreateAppInput', {
    fields: (t) => ({
      provider: t.string({ required: true }),
      name: t.string(),
      clientId: t.string({ required: true }),
      clientSecret: t.string(),
      scopes: t.stringList(),
      eventsSecret: t.string(),
      appId: t.string({ description: "A GitHub App's numeric id" }),
      slug: t.string({ description: "A GitHub App's slug" }),
      privateKey: t.string({ description: "A GitHub App's private key (PEM)" }),
      default: t.boolean(),
    }),
  });

  const UpdateAppInput = builder.inputType('UpdateAppInput', {
    fields: (t) => ({
      name: t.string(),
      clientSecret: t.string(),
      scopes: t.stringList({ description: "null: the provider's configured set" }),
      eventsSecret: t.string({ description: 'null removes it' }),
      privateKey: t.string(),
      default: t.boolean(),
    }),
  });

  return { AppRef, CreateAppInput, UpdateAppInput };
}

/** The refs `appTypes` registered. */
export type AppTypes = ReturnType<typeof appTypes>;

/** Query fields: apps. */
export function appQueries(t: QueryFields, { AppRef }: AppTypes) {
  return {
    apps: t.field({
      type: [AppRef],
      description: "The apps this organization may use: the deployment's and its own, of one provider or all (any member)",
      args: { provider: t.arg.string({ required: false }) },
      resolve: async (_root, args, ctx) => listApps(ctx.services, await workOf(ctx), given(args.provider)),
    }),
  };
}

/** Mutation fields: createApp, updateApp, deleteApp. */
export function appMutations(t: MutationFields, { AppRef, CreateAppInput, UpdateAppInput }: AppTypes) {
  return {
    createApp: t.field({
      type: AppRef,
      description: "Adds one of the organization's own apps (owner/admin, API token, service token); its secrets are never shown again",
      args: { input: t.arg({ type: CreateAppInput, required: true }) },
      resolve: async (_root, { input }, ctx) => {
        const app: NewApp = {
          provider: input.provider,
          clientId: input.clientId,
          name: given(input.name),
          clientSecret: given(input.clientSecret),
          scopes: given(input.scopes),
          eventsSecret: given(input.eventsSecret),
          appId: given(input.appId),
          slug: given(input.slug),
          privateKey: given(input.privateKey),
          default: given(input.default),
        };
        return createApp(ctx.services, await workOf(ctx), app);
      },
    }),
    updateApp: t.field({
      type: AppRef,
      description: "Changes one of the organization's own apps; a deployment app's default alone",
      args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateAppInput, required: true }) },
      resolve: async (_root, { id, input }, ctx) => {
        const change: AppChange = {
          name: given(input.name),
          clientSecret: given(input.clientSecret),
          scopes: input.scopes,
          eventsSecret: input.eventsSecret,
          privateKey: given(input.privateKey),
          default: given(input.default),
        };
        return updateApp(ctx.services, await workOf(ctx), String(id), change);
      },
    }),
    deleteApp: t.boolean({
      description: "Deletes one of the organization's own apps, unless integrations, pending connect sessions or OAuth flows use it",
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => {
        await deleteApp(ctx.services, await workOf(ctx), String(args.id));
        return true;
      },
    }),
  };
}
