import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { openDatabase } from '../src/db/index.js';
import { type ClaimedDelivery, claimDue, OWNER_SHARE, recordAttempt } from '../src/modules/webhooks/queue.js';
import { verifySignature } from '../src/modules/webhooks/signature.js';
import {
  createScratchDatabase,
  DATABASES,
  type DatabaseKind,
  type Defer,
  deferPerTest,
  type ScratchDatabase,
  sqliteAppWith,
  testConfig,
} from './support/app.js';
import { call, createArticle, registerUser, type TestUser } from './support/client.js';
import { fakeDns, fakeDnsDelays } from './support/fake-dns.js';
import { childEnv, NO_RATE_LIMITS, request, SERVER_ENTRY, startServer } from './support/processes.js';

vi.mock('node:dns', async (importOriginal) => {
  const { withFakeLookup } = await import('./support/fake-dns.js');
  return withFakeLookup(await importOriginal<typeof import('node:dns')>());
});

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A webhook receiver on 127.0.0.1 that records every request. `status` answers each one, given its path and how many
 * requests that path has had, this one included.
 */
async function startReceiver(status: (path: string, count: number) => number = () => 200) {
  const received: Received[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      const path = request.url ?? '';
      received.push({ path, headers: request.headers, body });
      response.statusCode = status(path, received.filter((entry) => entry.path === path).length);
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    at: (path: string) => received.filter((entry) => entry.path === path),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

async function eventually<T>(read: () => T | Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * An app whose webhooks may call the loopback receiver, retrying after 20 ms instead of 5 s. Without the overload
 * guard, which has tests of its own: on a busy machine it answered the fair-share tests' setup (dozens of requests
 * in a row from one client) 503.
 */
async function webhookApp(databaseUrl: string, overrides: Record<string, string> = {}): Promise<FastifyInstance> {
  const config = testConfig(databaseUrl, { WEBHOOK_ALLOW_LOOPBACK: 'true', OVERLOAD_EVENT_LOOP_DELAY_MS: '0', ...overrides });
  return buildApp({ ...config, webhooks: { ...config.webhooks, backoffBaseMs: 20 } });
}

const addWebhook = (app: FastifyInstance, user: TestUser, url: string, events: string[] = ['article.created']) =>
  call(app, 'POST', '/api/webhooks', { token: user.token, body: { webhook: { url, events } } });

async function addedWebhook(app: FastifyInstance, user: TestUser, url: string, events?: string[]) {
  const response = await addWebhook(app, user, url, events);
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.webhook as { id: number; secret: string };
}

const eventOf = (entry: Received) => JSON.parse(entry.body) as { id: string; type: string; version: number; data: any };

for (const kind of DATABASES) {
  describe(`webhooks [${kind}]`, () => {
    let scratch: ScratchDatabase;
    let app: FastifyInstance;
    let receiver: Receiver;
    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
      app = await webhookApp(scratch.url);
      receiver = await startReceiver((path, count) =>
        (path === '/flaky' && count <= 2) || (path === '/first-fails' && count === 1) ? 500 : 200,
      );
    });
    afterAll(async () => {
      await app?.close();
      await receiver?.close();
      await scratch?.drop();
    });

    it('creates, lists, shows, rotates and deletes endpoints, showing the secret only when it is new', async () => {
      const user = await registerUser(app, 'hook');
      const created = await addWebhook(app, user, receiver.url('/crud'), ['comment.created', 'article.created']);
      expect(created.status).toBe(201);
      expect(created.body.webhook).toEqual({
        id: expect.any(Number),
        url: receiver.url('/crud'),
        // In the catalogue's order, whatever order they were asked for in.
        events: ['article.created', 'comment.created'],
        enabled: true,
        disabledReason: null,
        createdAt: expect.any(String),
        secret: expect.stringMatching(/^whsec_/),
      });
      const { id, secret, ...shown } = created.body.webhook;

      const listed = await call(app, 'GET', '/api/webhooks', { token: user.token });
      expect(listed.body).toEqual({ webhooks: [{ id, ...shown }] });
      expect((await call(app, 'GET', `/api/webhooks/${id}`, { token: user.token })).body).toEqual({ webhook: { id, ...shown } });

      const rotated = await call(app, 'POST', `/api/webhooks/${id}/rotate-secret`, { token: user.token });
      expect(rotated.status).toBe(200);
      expect(rotated.body.webhook.secret).toMatch(/^whsec_/);
      expect(rotated.body.webhook.secret).not.toBe(secret);
      expect(JSON.stringify((await call(app, 'GET', `/api/webhooks/${id}`, { token: user.token })).body)).not.toContain('whsec_');

      expect((await call(app, 'DELETE', `/api/webhooks/${id}`, { token: user.token })).status).toBe(204);
      expect((await call(app, 'GET', `/api/webhooks/${id}`, { token: user.token })).status).toBe(404);
      expect((await call(app, 'GET', '/api/webhooks', { token: user.token })).body).toEqual({ webhooks: [] });
      expect((await call(app, 'GET', '/api/webhooks')).status).toBe(401);
    });

    it('never keeps a secret for an Idempotency-Key: a replay rotates and shows a new one', async () => {
      const user = await registerUser(app, 'hook');
      const send = () =>
        call(app, 'POST', '/api/webhooks', {
          token: user.token,
          headers: { 'idempotency-key': 'create-hook-once' },
          body: { webhook: { url: receiver.url('/idempotent'), events: ['article.created'] } },
        });
      const first = await send();
      expect(first.status).toBe(201);
      const kept = await app.db
        .selectFrom('idempotency_keys')
        .select('response')
        .where('key', '=', 'create-hook-once')
        .executeTakeFirstOrThrow();
      expect(kept.response).not.toContain('whsec_');

      const again = await send();
      expect(again.status).toBe(201);
      expect(again.body.webhook.id).toBe(first.body.webhook.id);
      expect(again.body.webhook.secret).toMatch(/^whsec_/);
      expect(again.body.webhook.secret).not.toBe(first.body.webhook.secret);
      const stored = await app.db
        .selectFrom('webhook_endpoints')
        .select('secret')
        .where('id', '=', first.body.webhook.id)
        .executeTakeFirstOrThrow();
      expect(stored.secret).toBe(again.body.webhook.secret);
      expect((await call(app, 'GET', '/api/webhooks', { token: user.token })).body.webhooks).toHaveLength(1);
    });

    it("answers 404 for another user's endpoint, whatever is asked of it", async () => {
      const owner = await registerUser(app, 'owner');
      const other = await registerUser(app, 'other');
      const { id } = await addedWebhook(app, owner, receiver.url('/theirs'));
      const notFound = { errors: { webhook: ['not found'] } };
      for (const [method, path, body] of [
        ['GET', `/api/webhooks/${id}`],
        ['DELETE', `/api/webhooks/${id}`],
        ['POST', `/api/webhooks/${id}/rotate-secret`],
        ['POST', `/api/webhooks/${id}/enable`],
        ['GET', `/api/webhooks/${id}/deliveries`],
        ['POST', `/api/webhooks/${id}/replay`, { eventId: '1' }],
      ] as const) {
        const response = await call(app, method, path, { token: other.token, body });
        expect(response.status, `${method} ${path}`).toBe(404);
        expect(response.body).toEqual(notFound);
      }
      expect((await call(app, 'GET', '/api/webhooks', { token: other.token })).body).toEqual({ webhooks: [] });
      expect((await call(app, 'GET', `/api/webhooks/${id}`, { token: owner.token })).status).toBe(200);
    });

    it('refuses event lists that are empty, repeat a type or name an unknown one', async () => {
      const user = await registerUser(app, 'lists');
      const url = receiver.url('/lists');
      for (const events of [[], ['article.created', 'article.created'], ['article.exploded']]) {
        const response = await addWebhook(app, user, url, events);
        expect(response.status, JSON.stringify(events)).toBe(422);
        expect(Object.keys(response.body.errors)).toEqual(['events']);
      }
    });

    it('refuses URLs that are not http(s) or point into private networks', async () => {
      const user = await registerUser(app, 'ssrf');
      for (const url of ['http://169.254.169.254/latest/meta-data', 'ftp://example.com/hook', 'http://10.0.0.1/', 'not a url']) {
        const response = await addWebhook(app, user, url);
        expect(response.status, url).toBe(422);
        expect(response.body.errors.url, url).toEqual([expect.any(String)]);
      }
    });

    it('holds a user to 10 endpoints, even when they ask for more at once', async () => {
      const user = await registerUser(app, 'many');
      const responses = await Promise.all(Array.from({ length: 13 }, (_, n) => addWebhook(app, user, receiver.url(`/many/${n}`))));
      expect(responses.filter((response) => response.status === 201)).toHaveLength(10);
      const refused = responses.filter((response) => response.status !== 201);
      expect(refused.map((response) => response.status)).toEqual([422, 422, 422]);
      expect(refused[0]!.body.errors.webhook[0]).toMatch(/10 endpoints/);
      expect((await call(app, 'GET', '/api/webhooks', { token: user.token })).body.webhooks).toHaveLength(10);
    });

    it('delivers the events asked for, signed with the secret, and logs each delivery', async () => {
      const author = await registerUser(app, 'signed');
      const { id, secret } = await addedWebhook(app, author, receiver.url('/signed'));
      const article = await createArticle(app, author.token);
      const [entry] = await eventually(
        () => receiver.at('/signed'),
        (list) => list.length === 1,
        'the delivery',
      );
      const event = eventOf(entry!);
      expect(event).toMatchObject({ type: 'article.created', version: 1, data: { article: { slug: article.slug } } });
      const headers = {
        id: String(entry!.headers['webhook-id']),
        timestamp: String(entry!.headers['webhook-timestamp']),
        signature: String(entry!.headers['webhook-signature']),
      };
      expect(headers.id).toBe(`evt_${event.id}`);
      expect(verifySignature(secret, headers, entry!.body, Math.floor(Date.now() / 1000))).toBe(true);
      expect(verifySignature(secret, headers, `${entry!.body} `, Math.floor(Date.now() / 1000))).toBe(false);

      const log = await eventually(
        () => call(app, 'GET', `/api/webhooks/${id}/deliveries`, { token: author.token }),
        (response) => response.body.deliveries[0]?.status === 'delivered',
        'the delivery to be recorded',
      );
      expect(log.body).toEqual({
        deliveries: [
          {
            id: expect.any(Number),
            eventId: event.id,
            eventType: 'article.created',
            status: 'delivered',
            attempts: 1,
            lastStatus: 200,
            lastLatencyMs: expect.any(Number),
            lastError: null,
            createdAt: expect.any(String),
            finishedAt: expect.any(String),
            nextAttemptAt: null,
          },
        ],
        nextCursor: null,
      });
      // Only the types asked for: an update is not one of them.
      await call(app, 'PUT', `/api/articles/${article.slug}`, { token: author.token, body: { article: { body: 'new' } } });
      await createArticle(app, author.token);
      await eventually(
        () => receiver.at('/signed'),
        (list) => list.length === 2,
        'the second article',
      );
      expect(receiver.at('/signed').map((received) => eventOf(received).type)).toEqual(['article.created', 'article.created']);
    });

    it('retries a failing endpoint with the same webhook-id until it answers 2xx', async () => {
      const author = await registerUser(app, 'flaky');
      const { id } = await addedWebhook(app, author, receiver.url('/flaky'));
      await createArticle(app, author.token);
      const attempts = await eventually(
        () => receiver.at('/flaky'),
        (list) => list.length === 3,
        'three attempts',
      );
      expect(new Set(attempts.map((entry) => entry.headers['webhook-id'])).size).toBe(1);
      const log = await eventually(
        () => call(app, 'GET', `/api/webhooks/${id}/deliveries`, { token: author.token }),
        (response) => response.body.deliveries[0]?.status === 'delivered',
        'the delivery to succeed',
      );
      expect(log.body.deliveries[0]).toMatchObject({ attempts: 3, lastStatus: 200, lastError: null });

      // Other tests share this app, so its counters are at least this one's attempts.
      const scraped = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      const counted = (outcome: string) =>
        Number(new RegExp(`^conduit_webhook_attempts_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(scraped)?.[1]);
      expect(counted('retrying')).toBeGreaterThanOrEqual(2);
      expect(counted('delivered')).toBeGreaterThanOrEqual(1);
      expect(scraped).toMatch(/^conduit_webhook_delivery_lag_seconds_count [1-9]/m);
    });

    it("sends one endpoint's events in event order, later ones waiting while an earlier one is retried", async () => {
      const author = await registerUser(app, 'ordered');
      const reader = await registerUser(app, 'reader');
      await addedWebhook(app, author, receiver.url('/first-fails'), ['article.created', 'article.updated', 'article.favorited']);
      const { slug } = await createArticle(app, author.token);
      for (const body of ['second', 'third', 'fourth']) {
        await call(app, 'PUT', `/api/articles/${slug}`, { token: author.token, body: { article: { body } } });
      }
      await call(app, 'POST', `/api/articles/${slug}/favorite`, { token: reader.token });
      const received = await eventually(
        () => receiver.at('/first-fails'),
        (list) => list.length === 6,
        'five events and one retry',
      );
      const ids = received.map((entry) => Number(eventOf(entry).id));
      // The first attempt failed; nothing overtook its retry.
      expect(ids[0]).toBe(ids[1]);
      expect(ids.slice(1)).toEqual([...ids.slice(1)].sort((a, b) => a - b));
      expect(received.slice(1).map((entry) => eventOf(entry).type)).toEqual([
        'article.created',
        'article.updated',
        'article.updated',
        'article.updated',
        'article.favorited',
      ]);
    });

    it('replays a past event of the caller to an endpoint, and only theirs', async () => {
      const author = await registerUser(app, 'replay');
      const stranger = await registerUser(app, 'stranger');
      const { id } = await addedWebhook(app, author, receiver.url('/replay'));
      await createArticle(app, author.token);
      const [first] = await eventually(
        () => receiver.at('/replay'),
        (list) => list.length === 1,
        'the delivery',
      );
      const eventId = eventOf(first!).id;

      const replayed = await call(app, 'POST', `/api/webhooks/${id}/replay`, { token: author.token, body: { eventId } });
      expect(replayed.status).toBe(202);
      expect(replayed.body.delivery).toMatchObject({ eventId, eventType: 'article.created', status: 'pending', attempts: 0 });
      const [, again] = await eventually(
        () => receiver.at('/replay'),
        (list) => list.length === 2,
        'the replay',
      );
      expect(again!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
      expect(again!.body).toBe(first!.body);

      const theirs = await addedWebhook(app, stranger, receiver.url('/replay-stranger'));
      const refused = await call(app, 'POST', `/api/webhooks/${theirs.id}/replay`, { token: stranger.token, body: { eventId } });
      expect(refused.status).toBe(404);
      expect(refused.body).toEqual({ errors: { event: ['not found'] } });
      const malformed = await call(app, 'POST', `/api/webhooks/${id}/replay`, { token: author.token, body: { eventId: 'evt_1' } });
      expect(malformed.status).toBe(422);
    });

    it('pages through the delivery log newest first, refusing a cursor it did not write', async () => {
      const author = await registerUser(app, 'paged');
      const { id } = await addedWebhook(app, author, receiver.url('/paged'));
      for (let n = 0; n < 5; n++) await createArticle(app, author.token);
      const pages: number[][] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor === null ? '' : `&cursor=${cursor}`;
        const page = await call(app, 'GET', `/api/webhooks/${id}/deliveries?limit=2${query}`, { token: author.token });
        expect(page.status).toBe(200);
        pages.push(page.body.deliveries.map((delivery: { id: number }) => delivery.id));
        cursor = page.body.nextCursor;
      } while (cursor !== null);
      expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
      const ids = pages.flat();
      expect(ids).toEqual([...ids].sort((a, b) => b - a));
      for (const bad of ['abc', 'MA', '%00', 'x'.repeat(65)]) {
        const response = await call(app, 'GET', `/api/webhooks/${id}/deliveries?cursor=${bad}`, { token: author.token });
        expect(response.status, bad).toBe(422);
        expect(Object.keys(response.body.errors), bad).toEqual(['cursor']);
      }
    });

    it('fails a delivery to a refused host at once, saying the same of an internal name and of one that does not exist', async () => {
      fakeDns.set('intranet.example.test', ['10.1.2.3']);
      fakeDns.set('nowhere.example.test', 'nonexistent');
      // Asking the whole DNS about a made-up name takes longer than the server's own resolver takes over an internal one.
      const lookupMs = 1_500;
      fakeDnsDelays.set('nowhere.example.test', lookupMs);
      const author = await registerUser(app, 'oracle');
      const internal = await addedWebhook(app, author, 'http://intranet.example.test/hook');
      const nonexistent = await addedWebhook(app, author, 'http://nowhere.example.test/hook');
      await createArticle(app, author.token);
      // All the log shows of a delivery but its own id and times; of those, how long it took to fail.
      const logOf = async (id: number) => {
        const [latest] = (await call(app, 'GET', `/api/webhooks/${id}/deliveries`, { token: author.token })).body.deliveries;
        const { id: _delivery, createdAt, finishedAt, ...shown } = latest;
        return { shown, tookMs: Date.parse(finishedAt) - Date.parse(createdAt) };
      };
      const failed = ({ shown }: { shown: { status: string } }) => shown.status === 'failed';
      // The retry window is the default day: only failing at once ends them within the wait.
      const forInternal = await eventually(() => logOf(internal.id), failed, 'the internal name to fail');
      const forNonexistent = await eventually(() => logOf(nonexistent.id), failed, 'the nonexistent name to fail');
      // Recorded as of the start of the attempt, the slow lookup shows in neither.
      expect(forNonexistent.tookMs).toBeLessThan(lookupMs);
      const [shownForInternal, shownForNonexistent] = [forInternal.shown, forNonexistent.shown];
      expect(shownForInternal).toEqual({
        eventId: expect.any(String),
        eventType: 'article.created',
        status: 'failed',
        attempts: 1,
        lastStatus: null,
        lastLatencyMs: null,
        lastError: 'host not found or not allowed',
        nextAttemptAt: null,
      });
      expect(shownForNonexistent).toEqual(shownForInternal);
      // The endpoints stay enabled: once the name points somewhere allowed, the next event goes out.
      for (const { id } of [internal, nonexistent]) {
        expect((await call(app, 'GET', `/api/webhooks/${id}`, { token: author.token })).body.webhook).toMatchObject({ enabled: true });
      }
    });
  });

  describe(`webhooks past the retry window [${kind}]`, () => {
    let scratch: ScratchDatabase;
    let app: FastifyInstance;
    let receiver: Receiver;
    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
      app = await webhookApp(scratch.url, { WEBHOOK_RETRY_FOR: '1s' });
      receiver = await startReceiver(() => 500);
    });
    afterAll(async () => {
      await app?.close();
      await receiver?.close();
      await scratch?.drop();
    });

    it('gives up, disables the endpoint and notifies its owner; enabling it brings new events again', async () => {
      const author = await registerUser(app, 'dead');
      const { id } = await addedWebhook(app, author, receiver.url('/dead'));
      await createArticle(app, author.token);
      const disabled = await eventually(
        () => call(app, 'GET', `/api/webhooks/${id}`, { token: author.token }),
        (response) => response.body.webhook.enabled === false,
        'the endpoint to be disabled',
      );
      expect(disabled.body.webhook.disabledReason).toMatch(/status 500/);
      expect(receiver.at('/dead').length).toBeGreaterThan(2);

      const log = await call(app, 'GET', `/api/webhooks/${id}/deliveries`, { token: author.token });
      expect(log.body.deliveries).toEqual([expect.objectContaining({ status: 'failed', lastStatus: 500, nextAttemptAt: null })]);
      const notices = await app.db.selectFrom('notifications').selectAll().where('endpoint_id', '=', id).execute();
      expect(notices).toEqual([expect.objectContaining({ kind: 'webhook-disabled', recipient_id: notices[0]?.actor_id, event_id: null })]);

      // Disabled, it is sent nothing.
      const attempts = receiver.at('/dead').length;
      await createArticle(app, author.token);
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(receiver.at('/dead')).toHaveLength(attempts);

      const enabled = await call(app, 'POST', `/api/webhooks/${id}/enable`, { token: author.token });
      expect(enabled.body.webhook).toMatchObject({ enabled: true, disabledReason: null });
      await createArticle(app, author.token);
      await eventually(
        () => receiver.at('/dead'),
        (list) => list.length > attempts,
        'a delivery after enabling',
      );
    });
  });
}

describe('webhook URLs without WEBHOOK_ALLOW_LOOPBACK', () => {
  const defer = deferPerTest();

  it('refuses this host', async () => {
    const app = await sqliteAppWith(defer, {});
    const user = await registerUser(app, 'local');
    for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost/hook', 'http://[::1]/hook']) {
      const response = await addWebhook(app, user, url);
      expect(response.status, url).toBe(422);
      expect(response.body.errors.url, url).toEqual([expect.any(String)]);
    }
  });
});

const postgres: DatabaseKind[] = DATABASES.filter((kind) => kind === 'postgres');
describe.each(postgres)('two instances on one database [%s]', (kind) => {
  const defer = deferPerTest();

  it('deliver each event exactly once between them', async () => {
    const scratch = await createScratchDatabase(kind);
    defer(() => scratch.drop());
    const receiver = await startReceiver();
    defer(() => receiver.close());
    const first = await webhookApp(scratch.url);
    defer(() => first.close());
    const second = await webhookApp(scratch.url);
    defer(() => second.close());

    const users = await Promise.all([0, 1, 2, 3].map(() => registerUser(first, 'pair')));
    await Promise.all(users.map((user, n) => addedWebhook(first, user, receiver.url(`/pair/${n}`))));
    // Both instances take writes, and both have a worker polling the same queue.
    await Promise.all(users.flatMap((user) => [first, second, first, second, first, second].map((app) => createArticle(app, user.token))));
    const received = () => users.flatMap((_, n) => receiver.at(`/pair/${n}`));
    await eventually(received, (list) => list.length >= 24, 'every delivery');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const ids = received().map((entry) => String(entry.headers['webhook-id']));
    expect(ids).toHaveLength(24);
    expect(new Set(ids).size).toBe(24);
  });
});

const LEASE_MS = 60_000;

/**
 * An app that queues deliveries and sends none, so that a test claims them as a worker would. `queueFor` gives a new
 * owner `endpoints` endpoints and one article: a due delivery at each endpoint.
 */
async function queueOnly(kind: DatabaseKind, defer: Defer) {
  const scratch = await createScratchDatabase(kind);
  defer(() => scratch.drop());
  const app = await webhookApp(scratch.url, { WEBHOOKS_DELIVERY: 'off' });
  defer(() => app.close());
  const ownerOf = new Map<number, string>();
  return {
    async queueFor(owner: string, endpoints: number) {
      const user = await registerUser(app, owner);
      for (let n = 0; n < endpoints; n++) ownerOf.set((await addedWebhook(app, user, `http://127.0.0.1:9/${owner}/${n}`)).id, owner);
      await createArticle(app, user.token);
    },
    /** A database handle of its own, as another process would have. */
    worker() {
      const handle = openDatabase(testConfig(scratch.url).database);
      defer(() => handle.destroy());
      return handle;
    },
    ownerOf: (delivery: ClaimedDelivery) => ownerOf.get(delivery.endpointId),
    countByOwner(claimed: ClaimedDelivery[]) {
      const counts: Record<string, number> = {};
      for (const { endpointId } of claimed) {
        const owner = ownerOf.get(endpointId) ?? 'unknown';
        counts[owner] = (counts[owner] ?? 0) + 1;
      }
      return counts;
    },
  };
}

describe.each(DATABASES)('a fair share of the delivery slots [%s]', (kind) => {
  const defer = deferPerTest();
  const policy = { retryForMs: 60_000, backoffBaseMs: 1_000 };
  const delivered = { ok: true, refused: false, status: 200, latencyMs: 1, error: null };

  it("holds each owner to their share, so a bystander's delivery goes out beside many slow endpoints, then round-robin", async () => {
    const queue = await queueOnly(kind, defer);
    for (const owner of ['a', 'b', 'c']) await queue.queueFor(owner, 10);
    await queue.queueFor('bystander', 1);
    const worker = queue.worker();
    const now = Date.now();
    const out = await claimDue(worker, now, 16, LEASE_MS);
    expect(queue.countByOwner(out)).toEqual({ a: OWNER_SHARE, b: OWNER_SHARE, c: OWNER_SHARE, bystander: 1 });
    // Every owner has their share on its way: nothing more goes until one comes back, however many slots are free.
    expect(await claimDue(worker, now, 16, LEASE_MS)).toEqual([]);

    // One of a's comes back. A newcomer, with nothing on its way, goes ahead of a's next; then a has its share again.
    const backFromA = out.find((delivery) => queue.ownerOf(delivery) === 'a');
    await recordAttempt(worker.writer, backFromA!, delivered, now, policy);
    await queue.queueFor('newcomer', 1);
    const newcomer = await claimDue(worker, Date.now(), 1, LEASE_MS);
    expect(queue.countByOwner(newcomer)).toEqual({ newcomer: 1 });
    const second = await claimDue(worker, Date.now(), 16, LEASE_MS);
    expect(queue.countByOwner(second)).toEqual({ a: 1 });

    // All back: a quiet owner's one delivery, queued last, goes before the older ones of the owners served already,
    // and those take turns, one each before anyone's second.
    for (const delivery of [...out, ...newcomer, ...second]) await recordAttempt(worker.writer, delivery, delivered, Date.now(), policy);
    await queue.queueFor('quiet', 1);
    expect(queue.countByOwner(await claimDue(worker, Date.now(), 1, LEASE_MS))).toEqual({ quiet: 1 });
    expect(queue.countByOwner(await claimDue(worker, Date.now(), 3, LEASE_MS))).toEqual({ a: 1, b: 1, c: 1 });
  });

  it("delivers a bystander's event at once while other owners' receivers hold every request", async () => {
    const scratch = await createScratchDatabase(kind);
    defer(() => scratch.drop());
    const app = await webhookApp(scratch.url, { WEBHOOK_TIMEOUT: '60s' });
    defer(() => app.close());
    let held = 0;
    const slow = createServer(() => {
      held++;
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    defer(async () => {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    });
    const receiver = await startReceiver();
    defer(() => receiver.close());
    const { port } = slow.address() as AddressInfo;

    for (const name of ['a', 'b', 'c']) {
      const user = await registerUser(app, name);
      for (let n = 0; n < 10; n++) await addedWebhook(app, user, `http://127.0.0.1:${port}/${name}/${n}`);
      await createArticle(app, user.token);
    }
    await eventually(
      () => held,
      (count) => count >= 3 * OWNER_SHARE,
      "the slow owners' shares",
    );
    const bystander = await registerUser(app, 'bystander');
    await addedWebhook(app, bystander, receiver.url('/bystander'));
    await createArticle(app, bystander.token);
    // Far less than the 60 s the slow receivers hold each slot for.
    await eventually(
      () => receiver.at('/bystander'),
      (list) => list.length === 1,
      "the bystander's delivery",
      5_000,
    );
    expect(held).toBe(3 * OWNER_SHARE);
  });
});

// SQLite's processes take turns at its one writer lock, which processes inside one test cannot share.
describe.each(postgres)('a fair share across processes [%s]', (kind) => {
  const defer = deferPerTest();

  it('holds each owner to their share when several processes claim at once', async () => {
    const queue = await queueOnly(kind, defer);
    for (const owner of ['a', 'b', 'c']) await queue.queueFor(owner, 10);
    const workers = [queue.worker(), queue.worker(), queue.worker()];
    const now = Date.now();
    const claimed = await Promise.all([...workers, ...workers].map((worker) => claimDue(worker, now, 16, LEASE_MS)));
    expect(queue.countByOwner(claimed.flat())).toEqual({ a: OWNER_SHARE, b: OWNER_SHARE, c: OWNER_SHARE });
  });
});

describe.each(DATABASES)('a server killed between commit and delivery [%s]', (kind) => {
  const defer = deferPerTest();

  it('delivers every committed event exactly once after a restart', { timeout: 60_000 }, async () => {
    const scratch = await createScratchDatabase(kind);
    defer(() => scratch.drop());
    const receiver = await startReceiver();
    defer(() => receiver.close());
    const env = childEnv(scratch.url, { ...NO_RATE_LIMITS, WEBHOOK_ALLOW_LOOPBACK: 'true' });

    // The first server takes the writes but never delivers: every event is committed and its delivery still queued
    // when SIGKILL ends it.
    const first = await startServer(SERVER_ENTRY, [], { ...env, WEBHOOKS_DELIVERY: 'off' });
    let slugs: string[];
    try {
      const registered = await request(first.base, 'POST', '/api/users', {
        body: { user: { username: 'killed', email: 'killed@example.com', password: 'password123' } },
      });
      const { token } = registered.body.user;
      const added = await request(first.base, 'POST', '/api/webhooks', {
        token,
        body: { webhook: { url: receiver.url('/killed'), events: ['article.created', 'comment.created'] } },
      });
      expect(added.status).toBe(201);
      slugs = [];
      for (let n = 0; n < 10; n++) {
        const created = await request(first.base, 'POST', '/api/articles', {
          token,
          body: { article: { title: `Before the kill ${n}`, description: 'd', body: 'b' } },
        });
        expect(created.status).toBe(201);
        slugs.push(created.body.article.slug);
      }
    } finally {
      await first.stop('SIGKILL');
    }
    expect(receiver.at('/killed')).toEqual([]);

    const second = await startServer(SERVER_ENTRY, [], env);
    defer(() => second.stop('SIGTERM'));
    await eventually(
      () => receiver.at('/killed'),
      (list) => list.length >= 10,
      'the queued deliveries',
    );
    // Long enough for a second copy to have come, had one been sent.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const delivered = receiver.at('/killed').map((entry) => eventOf(entry));
    expect(delivered.map((event) => event.data.article.slug)).toEqual(slugs);
    expect(new Set(delivered.map((event) => event.id)).size).toBe(10);
  });
});
