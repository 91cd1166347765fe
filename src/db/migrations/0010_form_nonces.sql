CREATE TABLE "form_nonces" (
	"nonce_hash" text PRIMARY KEY NOT NULL,
	"binding_hash" text NOT NULL,
	"action_hash" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "form_nonces_expires_idx" ON "form_nonces" USING btree ("expires_at");