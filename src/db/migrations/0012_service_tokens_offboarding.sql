CREATE TABLE "service_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"token_hash" text NOT NULL,
	"last_four" text NOT NULL,
	"created_by" text,
	"expires_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "grant_revocations" (
	"organization_id" text NOT NULL,
	"id" text NOT NULL,
	"integration_id" text NOT NULL,
	"provider" text NOT NULL,
	"reason" text NOT NULL,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"key_id" text NOT NULL,
	"envelope" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"locked_until" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "grant_revocations_organization_id_id_pk" PRIMARY KEY("organization_id","id")
);
--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "created_by_service_token_id" text;--> statement-breakpoint
CREATE UNIQUE INDEX "service_tokens_hash_key" ON "service_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "grant_revocations_due_idx" ON "grant_revocations" USING btree ("next_attempt_at");--> statement-breakpoint
CREATE INDEX "grant_revocations_key_id_idx" ON "grant_revocations" USING btree ("key_id");--> statement-breakpoint
CREATE UNIQUE INDEX "organizations_service_external_id_key" ON "organizations" USING btree ("external_id") WHERE external_id IS NOT NULL AND created_by_service_token_id IS NOT NULL;--> statement-breakpoint
CREATE INDEX "organizations_external_id_idx" ON "organizations" USING btree ("external_id","id") WHERE external_id IS NOT NULL;
