-- OAuth apps as data (docs/contract.md §5e): an organization's own apps, their sealed secrets (one
-- immutable envelope per app, replaced by delete and insert), each organization's default app per
-- provider, and the app of every integration, OAuth state, connect session and grant to revoke.
-- What existed before was made with the deployment app of its provider, whose id is the provider id.
CREATE TABLE "oauth_apps" (
	"organization_id" text NOT NULL,
	"id" text NOT NULL,
	"provider" text NOT NULL,
	"name" text NOT NULL,
	"client_id" text NOT NULL,
	"scopes" text[],
	"github_app_id" text,
	"slug" text,
	"has_events_secret" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "oauth_apps_organization_id_id_pk" PRIMARY KEY("organization_id","id")
);
--> statement-breakpoint
ALTER TABLE "oauth_apps" ADD CONSTRAINT "oauth_apps_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "oauth_apps_organization_provider_idx" ON "oauth_apps" USING btree ("organization_id","provider");--> statement-breakpoint
CREATE UNIQUE INDEX "oauth_apps_id_idx" ON "oauth_apps" USING btree ("id");--> statement-breakpoint
CREATE TABLE "oauth_app_secrets" (
	"organization_id" text NOT NULL,
	"app_id" text NOT NULL,
	"key_id" text NOT NULL,
	"envelope" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "oauth_app_secrets_organization_id_app_id_pk" PRIMARY KEY("organization_id","app_id")
);
--> statement-breakpoint
ALTER TABLE "oauth_app_secrets" ADD CONSTRAINT "oauth_app_secrets_app_fk" FOREIGN KEY ("organization_id","app_id") REFERENCES "public"."oauth_apps"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "oauth_app_secrets_key_id_idx" ON "oauth_app_secrets" USING btree ("key_id");--> statement-breakpoint
CREATE TABLE "organization_default_apps" (
	"organization_id" text NOT NULL,
	"provider" text NOT NULL,
	"app_id" text NOT NULL,
	CONSTRAINT "organization_default_apps_organization_id_provider_pk" PRIMARY KEY("organization_id","provider")
);
--> statement-breakpoint
ALTER TABLE "organization_default_apps" ADD CONSTRAINT "organization_default_apps_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "integrations" ADD COLUMN "app_id" text;--> statement-breakpoint
UPDATE "integrations" SET "app_id" = "provider";--> statement-breakpoint
ALTER TABLE "integrations" ALTER COLUMN "app_id" SET NOT NULL;--> statement-breakpoint
CREATE INDEX "integrations_organization_app_idx" ON "integrations" USING btree ("organization_id","app_id");--> statement-breakpoint
ALTER TABLE "oauth_states" ADD COLUMN "app_id" text;--> statement-breakpoint
UPDATE "oauth_states" SET "app_id" = "provider";--> statement-breakpoint
ALTER TABLE "oauth_states" ALTER COLUMN "app_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "connect_sessions" ADD COLUMN "app_id" text;--> statement-breakpoint
ALTER TABLE "grant_revocations" ADD COLUMN "app_id" text;--> statement-breakpoint
UPDATE "grant_revocations" SET "app_id" = "provider";--> statement-breakpoint
ALTER TABLE "grant_revocations" ALTER COLUMN "app_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "grant_revocations" ADD COLUMN "app_key_id" text;--> statement-breakpoint
ALTER TABLE "grant_revocations" ADD COLUMN "app_envelope" text;
--> statement-breakpoint
-- Linear's revocation events name the Linear organization (docs/contract.md §5b): rows connected before keep it in their metadata.
UPDATE "integrations" SET "provider_workspace_id" = "metadata"->>'organizationId' WHERE "provider" = 'linear' AND "provider_workspace_id" IS NULL AND "metadata" ? 'organizationId';
