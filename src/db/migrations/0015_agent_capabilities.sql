CREATE TABLE "agent_capabilities" (
	"organization_id" text NOT NULL,
	"id" text NOT NULL,
	"token_hash" text NOT NULL,
	"agent" text,
	"scopes" text[] DEFAULT '{}'::text[] NOT NULL,
	"end_user_id" text,
	"subject_kind" text NOT NULL,
	"subject_id" text NOT NULL,
	"subject_user_id" text,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agent_capabilities_organization_id_id_pk" PRIMARY KEY("organization_id","id")
);
--> statement-breakpoint
ALTER TABLE "agent_capabilities" ADD CONSTRAINT "agent_capabilities_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "agent_capabilities_hash_key" ON "agent_capabilities" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "agent_capabilities_expires_idx" ON "agent_capabilities" USING btree ("expires_at");
