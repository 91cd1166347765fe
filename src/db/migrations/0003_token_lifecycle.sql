ALTER TABLE "integrations" ADD COLUMN "token_valid" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "integrations" ADD COLUMN "has_refresh_token" boolean DEFAULT false NOT NULL;