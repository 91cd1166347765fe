-- Provider events (docs/contract.md §5b): an integration keeps the workspace or account its
-- provider account belongs to (Slack team id, Zoom account id), and deliveries are found by the
-- ids they name, across organizations. Rows connected before this migration get the workspace
-- id only from the metadata the provider reported at connect (Slack `workspaceId`, Zoom
-- `accountId`, kept since migration 0007) — the same value, copied here on purpose; rows
-- without that metadata keep it null until they reconnect (docs/providers.md, "Provider events").
ALTER TABLE "integrations" ADD COLUMN "provider_workspace_id" text;--> statement-breakpoint
UPDATE "integrations" SET "provider_workspace_id" = "metadata"->>'workspaceId' WHERE "provider" = 'slack' AND "metadata" ? 'workspaceId';--> statement-breakpoint
UPDATE "integrations" SET "provider_workspace_id" = "metadata"->>'accountId' WHERE "provider" = 'zoom' AND "metadata" ? 'accountId';--> statement-breakpoint
CREATE INDEX "integrations_provider_account_idx" ON "integrations" USING btree ("provider","provider_account_id");--> statement-breakpoint
CREATE INDEX "integrations_provider_workspace_idx" ON "integrations" USING btree ("provider","provider_workspace_id") WHERE provider_workspace_id IS NOT NULL;--> statement-breakpoint
CREATE TABLE "provider_event_deliveries" (
	"provider" text NOT NULL,
	"delivery_id" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_event_deliveries_provider_delivery_id_pk" PRIMARY KEY("provider","delivery_id")
);
