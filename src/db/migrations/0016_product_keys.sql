-- The product's key for its customer (docs/contract.md §5d, decision 229): an organization's
-- external_id is set only by service tokens and system administrators and is unique across the
-- deployment. Before this, anyone could give one through GraphQL, unique only per creating user.
-- A value a person set stays where it collides with nothing; where it collides — with a service
-- token's organization or with another person's — it is cleared, and each clearing is written to
-- that organization's audit log (no actor: the migration; the detail names the value). A service
-- token's value never collides with another's (the old index held them unique), so it stays.
WITH "colliding" AS (
  SELECT o."id", o."external_id" FROM "organizations" o
  WHERE o."external_id" IS NOT NULL AND o."created_by_service_token_id" IS NULL
    AND EXISTS (SELECT 1 FROM "organizations" p WHERE p."external_id" = o."external_id" AND p."id" <> o."id")
), "cleared" AS (
  UPDATE "organizations" o SET "external_id" = NULL, "updated_at" = now() FROM "colliding" c WHERE o."id" = c."id" RETURNING o."id", c."external_id"
), "stamp" AS (
  -- A ULID's time part (Crockford base32 of the epoch milliseconds): the rows sort with the audit log's own.
  SELECT string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (((floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint >> (5 * (9 - i))) & 31)::int + 1, 1), '' ORDER BY i) AS "time"
  FROM generate_series(0, 9) AS i
)
INSERT INTO "audit_logs" ("organization_id", "id", "action", "target_type", "target_id", "detail")
SELECT "cleared"."id", "stamp"."time" || upper(substr(md5("cleared"."id" || random()::text), 1, 16)), 'organization.external_id_cleared', 'organization', "cleared"."id",
  jsonb_build_object('externalId', "cleared"."external_id", 'by', 'migration 0016', 'reason', 'another organization has the same externalId; only service tokens and system administrators set it now')
FROM "cleared", "stamp";--> statement-breakpoint
DROP INDEX IF EXISTS "organizations_creator_external_id_key";--> statement-breakpoint
DROP INDEX IF EXISTS "organizations_service_external_id_key";--> statement-breakpoint
DROP INDEX IF EXISTS "organizations_external_id_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "organizations_external_id_key" ON "organizations" USING btree ("external_id") WHERE external_id IS NOT NULL;--> statement-breakpoint
CREATE INDEX "organizations_created_by_user_idx" ON "organizations" USING btree ("created_by_user_id");
