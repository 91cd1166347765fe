// The provider events route is public (docs/contract.md §5b): it must not tell an outsider — or
// anyone holding a signing secret — which provider accounts Tessera holds integrations for.
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { githubEvents, type SignedDelivery, slackEvents } from '../fakes/provider-events.ts';
import { SECRETS } from '../helpers/provider-events.ts';
import { heal, t, useHostileWorld, world } from './world.ts';

useHostileWorld();

const post = (provider: string, delivery: SignedDelivery) => t.fastify.inject({ method: 'POST', url: `/v1/providers/${provider}/events`, headers: delivery.headers, payload: delivery.body });

/** What an answer shows, minus what differs on every request anyway. */
function shown(res: Awaited<ReturnType<typeof post>>) {
  const { requestId: _requestId, ...body } = res.json() as Record<string, unknown>;
  const headers = Object.keys(res.headers)
    .filter((name) => !['date', 'x-request-id', 'content-length'].includes(name))
    .sort()
    .map((name) => `${name}: ${name === 'content-type' || name === 'cache-control' ? res.headers[name] : ''}`);
  return { status: res.statusCode, body, headers };
}

async function accountOf(integrationId: string): Promise<string> {
  const [row] = await queryRows<{ provider_account_id: string }>(t.database.db, sql`SELECT provider_account_id FROM integrations WHERE id = ${integrationId}`);
  return row?.provider_account_id ?? '';
}

describe('provider events are no oracle', () => {
  it('a revocation naming a known account and one naming an unknown account answer alike; so do their forgeries', async () => {
    const [team, user] = (await accountOf(world.integrations.slack as string)).split(':') as [string, string];
    const octo = Number(await accountOf(world.integrations.github as string));
    const cases: [string, SignedDelivery, SignedDelivery][] = [
      ['slack', slackEvents(SECRETS.slack).tokensRevoked(team, ['U0NOBODY00']), slackEvents(SECRETS.slack).tokensRevoked(team, [user])],
      ['github', githubEvents(SECRETS.github).authorizationRevoked({ id: 99_999_999, login: 'nobody' }), githubEvents(SECRETS.github).authorizationRevoked({ id: octo, login: 'octo' })],
      ['slack', slackEvents('a-guessed-signing-secret-0000000').tokensRevoked(team, ['U0NOBODY00']), slackEvents('a-guessed-signing-secret-0000000').tokensRevoked(team, [user])],
      ['github', githubEvents('a-guessed-webhook-secret-000000').authorizationRevoked({ id: 99_999_999, login: 'nobody' }), githubEvents('a-guessed-webhook-secret-000000').authorizationRevoked({ id: octo, login: 'octo' })],
    ];
    for (const [provider, unknown, known] of cases) {
      const [answeredUnknown, answeredKnown] = [await post(provider, unknown), await post(provider, known)];
      expect(shown(answeredKnown), provider).toEqual(shown(answeredUnknown));
    }
    // The well-signed ones did revoke: the answer said nothing of it.
    const listed = await t.fastify.inject({ url: '/v1/integrations', headers: { authorization: `Bearer ${world.owner.token}` } });
    expect((listed.json().integrations as { status: string }[]).map((integration) => integration.status)).toEqual(['invalid', 'invalid']);
    world.dirty = true;
    await heal();
  });

  it('a provider configured without an events secret, or without events, is a 404 like any unknown route', async () => {
    const delivery = slackEvents(SECRETS.slack).urlVerification();
    for (const provider of ['gitlab', 'zoom', 'not-a-provider']) {
      const res = await post(provider, delivery);
      expect(res.statusCode, provider).toBe(404);
      expect(res.json()).toMatchObject({ success: false, code: 'NOT_FOUND' });
    }
  });
});
