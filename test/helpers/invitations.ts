import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.ts';
import { deliveredData } from '../../src/events/outbox.ts';
import type { Sealed } from '../../src/secrets/crypto.ts';
import type { TestApp } from './app.ts';

/** What `organization.member_invited` delivers about the invitation (besides `organizationId` and the nested objects). */
export interface InvitationDelivery {
  invitationId: string;
  email: string;
  role: string;
  acceptToken: string;
  acceptUrl: string;
}

/**
 * The `data` of invitation `invitationId`'s latest `organization.member_invited` event, as a
 * webhook receives it: the outbox row opened with the app's keyring, as the dispatcher opens
 * it. For tests that need an invitee to accept; test/invitations.test.ts takes it off a webhook.
 */
export async function invitationDelivery(t: Pick<TestApp, 'database' | 'config'>, invitationId: string): Promise<InvitationDelivery> {
  const [row] = await queryRows<{ organization_id: string; id: string; data: Record<string, unknown>; sealed: Sealed | null }>(
    t.database.db,
    sql`SELECT organization_id, id, data, sealed FROM events
        WHERE type = 'organization.member_invited' AND data->>'invitationId' = ${invitationId} ORDER BY id DESC LIMIT 1`,
  );
  if (!row) throw new Error(`no organization.member_invited event for invitation ${invitationId}`);
  return deliveredData(t.config.keyring, { organizationId: row.organization_id, id: row.id, data: row.data, sealed: row.sealed }) as unknown as InvitationDelivery;
}

/** The token of invitation `invitationId`'s latest sending. */
export async function acceptTokenOf(t: Pick<TestApp, 'database' | 'config'>, invitationId: string): Promise<string> {
  return (await invitationDelivery(t, invitationId)).acceptToken;
}
