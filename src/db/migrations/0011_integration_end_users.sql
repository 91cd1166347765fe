DROP INDEX "integrations_organization_provider_key";--> statement-breakpoint
ALTER TABLE "integrations" ADD COLUMN "end_user_key" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "integrations" ADD COLUMN "end_user" jsonb;--> statement-breakpoint
CREATE UNIQUE INDEX "integrations_organization_provider_end_user_key" ON "integrations" USING btree ("organization_id","provider","end_user_key");--> statement-breakpoint
ALTER TABLE "integrations" ADD CONSTRAINT "integrations_end_user_key_check" CHECK ("integrations"."end_user_key" = coalesce("integrations"."end_user"->>'id', ''));
