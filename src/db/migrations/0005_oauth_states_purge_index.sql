DROP INDEX "oauth_states_expires_idx";--> statement-breakpoint
CREATE INDEX "oauth_states_organization_expires_idx" ON "oauth_states" USING btree ("organization_id","expires_at");