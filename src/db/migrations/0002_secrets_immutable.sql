-- Secrets are immutable: replacing one is a delete followed by an insert. The database
-- enforces it, so no code path can rewrite a ciphertext in place.
CREATE FUNCTION integration_secrets_reject_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'integration_secrets rows are immutable: delete and insert instead' USING ERRCODE = 'restrict_violation';
END
$$;
--> statement-breakpoint
CREATE TRIGGER integration_secrets_no_update BEFORE UPDATE ON integration_secrets
  FOR EACH ROW EXECUTE FUNCTION integration_secrets_reject_update();
