-- Provider budgets (docs/contract.md §5f): what a provider last said about an account's rate limit, shared by
-- every instance. Keyed by `scope` — the app that made the grant (a deployment app's id, or an organization
-- app's ULID), or `integration:<id>` for the §5c modes, whose limit is the entered credentials' own — and
-- the provider account. `organization_id` is set for an organization's app and for a §5c integration, so
-- offboarding takes their budgets with the organization; a deployment app's budget is the provider
-- account's across organizations (decision 318).
CREATE TABLE "provider_budgets" (
	"scope" text NOT NULL,
	"account_id" text NOT NULL,
	"organization_id" text,
	"provider" text NOT NULL,
	"remaining" integer,
	"reset_at" timestamp with time zone,
	"blocked_until" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_budgets_scope_account_id_pk" PRIMARY KEY("scope","account_id")
);
--> statement-breakpoint
ALTER TABLE "provider_budgets" ADD CONSTRAINT "provider_budgets_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "provider_budgets_organization_idx" ON "provider_budgets" USING btree ("organization_id") WHERE "organization_id" IS NOT NULL;
