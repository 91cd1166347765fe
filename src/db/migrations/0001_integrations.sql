CREATE TABLE "integration_secrets" (
	"organization_id" text NOT NULL,
	"integration_id" text NOT NULL,
	"name" text NOT NULL,
	"key_id" text NOT NULL,
	"envelope" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "integration_secrets_organization_id_integration_id_name_pk" PRIMARY KEY("organization_id","integration_id","name")
);
--> statement-breakpoint
CREATE TABLE "integrations" (
	"organization_id" text NOT NULL,
	"id" text NOT NULL,
	"provider" text NOT NULL,
	"name" text NOT NULL,
	"description" text NOT NULL,
	"scopes" text[] DEFAULT '{}'::text[] NOT NULL,
	"provider_account_id" text NOT NULL,
	"status" text DEFAULT 'connected' NOT NULL,
	"last_error" text,
	"detected_at" timestamp with time zone,
	"last_validated_at" timestamp with time zone,
	"token_expires_at" timestamp with time zone,
	"refresh_token_expires_at" timestamp with time zone,
	"token_version" integer DEFAULT 1 NOT NULL,
	"next_validation_at" timestamp with time zone,
	"lease_owner" text,
	"lease_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "integrations_organization_id_id_pk" PRIMARY KEY("organization_id","id")
);
--> statement-breakpoint
CREATE TABLE "oauth_states" (
	"organization_id" text NOT NULL,
	"nonce_hash" text NOT NULL,
	"user_id" text NOT NULL,
	"provider" text NOT NULL,
	"redirect_uri" text NOT NULL,
	"scopes" text[] NOT NULL,
	"code_verifier" text,
	"code_verifier_key_id" text,
	"tx_hash" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "oauth_states_organization_id_nonce_hash_pk" PRIMARY KEY("organization_id","nonce_hash")
);
--> statement-breakpoint
ALTER TABLE "integrations" ADD CONSTRAINT "integrations_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "integration_secrets_key_id_idx" ON "integration_secrets" USING btree ("key_id");--> statement-breakpoint
CREATE UNIQUE INDEX "integrations_organization_provider_key" ON "integrations" USING btree ("organization_id","provider");--> statement-breakpoint
CREATE INDEX "integrations_next_validation_idx" ON "integrations" USING btree ("next_validation_at");--> statement-breakpoint
CREATE INDEX "oauth_states_expires_idx" ON "oauth_states" USING btree ("expires_at");