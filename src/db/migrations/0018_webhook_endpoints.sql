-- Webhook endpoints as data (docs/contract.md §7, decision 282): the deployment's, like service
-- tokens, so no organization leads their keys. Each endpoint's signing secrets are sealed under the
-- keyring (one current, and during a rotation's overlap the one before it, which expires).
CREATE TABLE "webhook_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"endpoint" text NOT NULL,
	"description" text,
	"event_types" text[],
	"enabled" boolean DEFAULT true NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_endpoint_secrets" (
	"endpoint_id" text NOT NULL,
	"id" text NOT NULL,
	"key_id" text NOT NULL,
	"envelope" text NOT NULL,
	"expires_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_endpoint_secrets_endpoint_id_id_pk" PRIMARY KEY("endpoint_id","id")
);
--> statement-breakpoint
ALTER TABLE "webhook_endpoint_secrets" ADD CONSTRAINT "webhook_endpoint_secrets_endpoint_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."webhook_endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_endpoint_secrets_key_idx" ON "webhook_endpoint_secrets" USING btree ("key_id");
