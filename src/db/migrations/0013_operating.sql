CREATE TABLE "background_jobs" (
	"name" text PRIMARY KEY NOT NULL,
	"next_run_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_run_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "event_delivery_attempts" (
	"organization_id" text NOT NULL,
	"event_id" text NOT NULL,
	"webhook_id" text NOT NULL,
	"number" integer NOT NULL,
	"at" timestamp with time zone NOT NULL,
	"response_status" integer,
	"error" text,
	"duration_ms" integer NOT NULL,
	"replay" boolean DEFAULT false NOT NULL,
	CONSTRAINT "event_delivery_attempts_organization_id_event_id_webhook_id_number_pk" PRIMARY KEY("organization_id","event_id","webhook_id","number")
);
--> statement-breakpoint
ALTER TABLE "event_deliveries" ADD COLUMN "failed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "event_deliveries" ADD COLUMN "endpoint" text;--> statement-breakpoint
ALTER TABLE "event_delivery_attempts" ADD CONSTRAINT "event_delivery_attempts_delivery_fk" FOREIGN KEY ("organization_id","event_id","webhook_id") REFERENCES "public"."event_deliveries"("organization_id","event_id","webhook_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "event_deliveries_listing_idx" ON "event_deliveries" USING btree ("event_id","webhook_id");--> statement-breakpoint
CREATE INDEX "event_deliveries_delivered_idx" ON "event_deliveries" USING btree ("delivered_at") WHERE delivered_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "event_deliveries_failed_idx" ON "event_deliveries" USING btree ("failed_at") WHERE failed_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "events_occurred_idx" ON "events" USING btree ("occurred_at");--> statement-breakpoint
CREATE INDEX "connect_sessions_expires_idx" ON "connect_sessions" USING btree ("expires_at");