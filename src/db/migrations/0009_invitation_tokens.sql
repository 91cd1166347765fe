ALTER TABLE "events" ADD COLUMN "sealed" jsonb;--> statement-breakpoint
ALTER TABLE "invitations" ADD COLUMN "accept_token_hash" text;