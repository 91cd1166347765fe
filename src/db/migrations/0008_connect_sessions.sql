CREATE TABLE "connect_sessions" (
	"organization_id" text NOT NULL,
	"id" text NOT NULL,
	"secret_hash" text NOT NULL,
	"redirect_uri" text NOT NULL,
	"allowed_providers" text[] NOT NULL,
	"end_user" jsonb,
	"status" text DEFAULT 'pending' NOT NULL,
	"integration_id" text,
	"last_error" text,
	"created_by_kind" text NOT NULL,
	"created_by_id" text NOT NULL,
	"created_by_user_id" text,
	"expires_at" timestamp with time zone NOT NULL,
	"completed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "connect_sessions_organization_id_id_pk" PRIMARY KEY("organization_id","id")
);
--> statement-breakpoint
ALTER TABLE "oauth_states" ALTER COLUMN "user_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "integrations" ADD COLUMN "connected_via" jsonb;--> statement-breakpoint
ALTER TABLE "oauth_states" ADD COLUMN "connect_session_id" text;--> statement-breakpoint
ALTER TABLE "oauth_states" ADD COLUMN "popup" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "external_id" text;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "created_by_user_id" text;--> statement-breakpoint
ALTER TABLE "connect_sessions" ADD CONSTRAINT "connect_sessions_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "connect_sessions_secret_hash_key" ON "connect_sessions" USING btree ("secret_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "organizations_creator_external_id_key" ON "organizations" USING btree ("created_by_user_id","external_id") WHERE external_id IS NOT NULL;