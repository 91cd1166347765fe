-- Provider events whose signature covers no freshness (GitHub signs neither a timestamp nor its
-- delivery id; docs/contract.md §5b): the SHA-256 digest of each revocation body acted on, so that
-- the same raw bytes under a new delivery id are checked live at the provider before they act.
-- Kept, like those providers' delivery ids, while integrations of that provider exist (src/jobs/retention.ts).
CREATE TABLE "provider_event_bodies" (
	"provider" text NOT NULL,
	"digest" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_event_bodies_provider_digest_pk" PRIMARY KEY("provider","digest")
);
