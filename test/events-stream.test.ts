import { once } from 'node:events';
import { type AddressInfo, connect, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { BufferBudget } from '../src/modules/events/buffer-budget.js';
import { readEventsById } from '../src/modules/events/stream.js';
import {
  createScratchDatabase,
  DATABASES,
  deferPerTest,
  describeEachDatabase,
  type ScratchDatabase,
  sqliteAppWith,
  testConfig,
} from './support/app.js';
import { call, createArticle, registerUser, type TestUser, unique } from './support/client.js';
import { CONDUIT_BIN, childEnv, NO_RATE_LIMITS, type RunningServer, request, SERVER_ENTRY, startServer } from './support/processes.js';
import { openStream, type SseMessage, type SseStream } from './support/sse.js';

const HEARTBEAT = { EVENT_STREAM_HEARTBEAT: '1s' };

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** The slugs of the article events, and the articles commented on, in the order the stream sent them. */
const slugs = (stream: SseStream) => stream.events().map((event) => event.envelope.data.article?.slug);
const withIds = (count: number) => (messages: SseMessage[]) => messages.filter((message) => message.id !== undefined).length >= count;

/**
 * The events about these articles, and the viewer's notifications. On PostgreSQL a new stream starts below the oldest
 * transaction running anywhere on the server (events/stream.ts), so it may also carry events committed just before it
 * opened: other tests' among them.
 */
const about = (stream: SseStream, articles: string[]) =>
  stream.events().filter((event) => event.name === 'notification' || articles.includes(event.envelope.data.article?.slug));
const untilAbout = (stream: SseStream, articles: string[], count: number) => stream.until(() => about(stream, articles).length >= count);

async function comment(app: FastifyInstance, user: TestUser, slug: string) {
  const response = await call(app, 'POST', `/api/articles/${slug}/comments`, { token: user.token, body: { comment: { body: 'Nice' } } });
  expect(response.status).toBe(201);
  return response.body.comment;
}

describeEachDatabase(
  'GET /api/events',
  (ctx) => {
    const defer = deferPerTest();
    let base = '';
    beforeAll(async () => {
      base = await listen(ctx().app);
    });

    // Injected, not fetched: a scrape over a kept-alive connection would leave one more socket for the close to wait on.
    const openStreams = async () =>
      Number(/^conduit_event_streams_open (\d+)$/m.exec((await ctx().app.inject({ method: 'GET', url: '/metrics' })).body)?.[1]);

    /** A stream that is subscribed: its first frame (`retry:`) has arrived, so every later write reaches it. */
    async function open(query = '', headers: Record<string, string> = {}, at = base): Promise<SseStream> {
      const stream = await openStream(`${at}/api/events${query}`, headers);
      defer(async () => stream.close());
      expect(stream.status).toBe(200);
      await stream.until((messages) => messages.length > 0);
      return stream;
    }

    it('sends public events to anyone, as SSE with their envelope, and not who follows whom', async () => {
      const { app } = ctx();
      const stream = await open();
      expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(stream.headers.get('cache-control')).toBe('no-cache');
      expect(stream.headers.get('x-accel-buffering')).toBe('no');
      expect(stream.messages[0]).toEqual({ retry: 3000 });

      const [author, reader] = [await registerUser(app, 'sse'), await registerUser(app, 'sse')];
      const article = await createArticle(app, author.token, { tagList: ['live'] });
      expect((await call(app, 'POST', `/api/profiles/${author.username}/follow`, { token: reader.token })).status).toBe(200);
      await comment(app, reader, article.slug);

      await untilAbout(stream, [article.slug], 2);
      const events = about(stream, [article.slug]);
      expect(events.map((event) => event.name)).toEqual(['article.created', 'comment.created']);
      expect(events[0]).toMatchObject({
        id: expect.stringMatching(/^\d+$/),
        envelope: { type: 'article.created', version: 1, data: { article: { slug: article.slug, tagList: ['live'] } } },
      });
      expect(events[0]!.envelope.id).toBe(events[0]!.id);
      expect(events[1]!.envelope.data.comment.author.username).toBe(reader.username);
    });

    it("sends a signed-in user their notifications as such, and nobody else's", async () => {
      const { app } = ctx();
      const [me, other, third] = [await registerUser(app, 'me'), await registerUser(app, 'other'), await registerUser(app, 'third')];
      const stream = await open('', { authorization: `Token ${me.token}` });
      const mine = await createArticle(app, me.token);
      const theirs = await createArticle(app, other.token);

      await comment(app, other, mine.slug);
      await comment(app, third, theirs.slug);
      await comment(app, me, mine.slug);
      expect((await call(app, 'POST', `/api/profiles/${me.username}/follow`, { token: other.token })).status).toBe(200);
      expect((await call(app, 'POST', `/api/profiles/${third.username}/follow`, { token: other.token })).status).toBe(200);
      expect((await call(app, 'POST', `/api/articles/${mine.slug}/favorite`, { token: third.token })).status).toBe(200);

      await untilAbout(stream, [mine.slug, theirs.slug], 7);
      expect(about(stream, [mine.slug, theirs.slug]).map((event) => [event.name, event.envelope.type])).toEqual([
        ['article.created', 'article.created'],
        ['article.created', 'article.created'],
        ['notification', 'comment.created'],
        ['comment.created', 'comment.created'],
        ['comment.created', 'comment.created'],
        ['notification', 'profile.followed'],
        ['notification', 'article.favorited'],
      ]);
      // Without the token the same writes are public events only.
      const anonymous = await open();
      await comment(app, other, mine.slug);
      await untilAbout(anonymous, [mine.slug], 1);
      expect(about(anonymous, [mine.slug]).map((event) => event.name)).toEqual(['comment.created']);
    });

    it('filters by tag, by author (their articles and the comments on them) and by type', async () => {
      const { app } = ctx();
      const [writer, someone] = [await registerUser(app, 'writer'), await registerUser(app, 'someone')];
      const tag = unique('tag');
      const byTag = await open(`?tag=${tag}`);
      const byAuthor = await open(`?author=${writer.username}`);
      const byType = await open('?types=comment.created,article.deleted');

      const tagged = await createArticle(app, someone.token, { tagList: [tag] });
      const untagged = await createArticle(app, writer.token);
      await comment(app, someone, untagged.slug);
      await comment(app, writer, tagged.slug);
      expect(
        (await call(app, 'PUT', `/api/articles/${tagged.slug}`, { token: someone.token, body: { article: { body: 'New' } } })).status,
      ).toBe(200);
      expect((await call(app, 'DELETE', `/api/articles/${untagged.slug}`, { token: writer.token })).status).toBe(204);

      const both = [tagged.slug, untagged.slug];
      await Promise.all([byTag.until(withIds(2)), byAuthor.until(withIds(3)), untilAbout(byType, both, 3)]);
      expect(byTag.events().map((event) => event.name)).toEqual(['article.created', 'article.updated']);
      expect(slugs(byTag)).toEqual([tagged.slug, tagged.slug]);
      expect(byAuthor.events().map((event) => event.name)).toEqual(['article.created', 'comment.created', 'article.deleted']);
      expect(slugs(byAuthor)).toEqual([untagged.slug, untagged.slug, untagged.slug]);
      expect(about(byType, both).map((event) => event.name)).toEqual(['comment.created', 'comment.created', 'article.deleted']);

      expect((await call(app, 'GET', '/api/events?author=nobody-is-called-this')).status).toBe(404);
      const refused = await call(app, 'GET', '/api/events?types=article.created,profile.followed');
      expect(refused.status).toBe(422);
      expect(refused.body.errors.types).toBeDefined();
      expect((await call(app, 'GET', '/api/events', { headers: { 'last-event-id': 'abc' } })).status).toBe(422);
    });

    it('resumes after Last-Event-ID with exactly the events missed, in order, then goes on live', async () => {
      const { app } = ctx();
      const author = await registerUser(app, 'resume');
      const first = await open(`?author=${author.username}`);
      const written: string[] = [];
      for (let i = 0; i < 5; i++) written.push((await createArticle(app, author.token)).slug);
      await first.until(withIds(5));
      expect(slugs(first)).toEqual(written);
      const lastSeen = first.events().at(-1)!.id;
      first.close();

      for (let i = 0; i < 5; i++) written.push((await createArticle(app, author.token)).slug);
      const resumed = await open(`?author=${author.username}`, { 'last-event-id': lastSeen });
      await resumed.until(withIds(5));
      written.push((await createArticle(app, author.token)).slug);
      await resumed.until(withIds(6));
      expect(slugs(resumed)).toEqual(written.slice(5));

      // The query parameter does the same, for EventSource polyfills that cannot set the header.
      const polyfilled = await open(`?author=${author.username}&lastEventId=${lastSeen}`);
      await polyfilled.until(withIds(6));
      expect(slugs(polyfilled)).toEqual(written.slice(5));
    });

    it("resumes a signed-in viewer's notifications whatever the filters, and only what the filters want besides", async () => {
      const { app } = ctx();
      const [me, other] = [await registerUser(app, 'resumer'), await registerUser(app, 'other')];
      const mine = await createArticle(app, me.token);
      const watching = await open(`?author=${other.username}`, { authorization: `Token ${me.token}` });
      const theirs = await createArticle(app, other.token);
      await watching.until(withIds(1));
      const lastSeen = watching.events().at(-1)!.id;
      watching.close();

      await comment(app, other, mine.slug);
      await comment(app, me, theirs.slug);
      await comment(app, other, theirs.slug);
      expect((await call(app, 'DELETE', `/api/articles/${theirs.slug}`, { token: other.token })).status).toBe(204);
      const resumed = await open(`?author=${other.username}&types=article.deleted`, {
        authorization: `Token ${me.token}`,
        'last-event-id': lastSeen,
      });
      await untilAbout(resumed, [mine.slug, theirs.slug], 2);
      expect(about(resumed, [mine.slug, theirs.slug]).map((event) => [event.name, event.envelope.data.article.slug])).toEqual([
        ['notification', mine.slug],
        ['article.deleted', theirs.slug],
      ]);
    });

    it('caps the streams one client address holds with 429, and frees a place when one closes', async () => {
      // The earlier tests' streams are closed, but the server may not have seen the last of them go yet.
      await expect.poll(openStreams).toBe(0);
      const streams = await Promise.all(Array.from({ length: 5 }, () => open()));
      const refused = await openStream(`${base}/api/events`);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toEqual({ errors: { rate: ['limit exceeded'] } });

      streams[0]!.close();
      await expect.poll(openStreams).toBe(4);
      const another = await open();
      // The tests after this one open streams of their own from the same address: every place is given back first.
      for (const stream of [...streams, another]) stream.close();
      await expect.poll(openStreams).toBe(0);
    });

    it('sends a heartbeat comment while nothing happens', async () => {
      const stream = await open();
      await stream.until((messages) => messages.some((message) => message.comment === 'ping'), 3000);
    });
  },
  HEARTBEAT,
);

for (const kind of DATABASES) {
  describe(`GET /api/events across a restart [${kind}]`, () => {
    let scratch: ScratchDatabase | undefined;
    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
    });
    afterAll(async () => scratch?.drop());

    it('ends its streams on close without holding it up, and the next server resumes them', async () => {
      const first = await buildApp(testConfig(scratch!.url));
      const author = await registerUser(first, 'restart');
      const stream = await openStream(`${await listen(first)}/api/events`);
      await stream.until((messages) => messages.length > 0);
      const written = [(await createArticle(first, author.token)).slug, (await createArticle(first, author.token)).slug];
      await stream.until(withIds(2));
      const lastSeen = stream.events().at(-1)!.id;
      written.push((await createArticle(first, author.token)).slug);

      const closing = Date.now();
      await first.close();
      await stream.ended;
      expect(Date.now() - closing).toBeLessThan(3000);

      const second = await buildApp(testConfig(scratch!.url));
      try {
        written.push((await createArticle(second, author.token)).slug);
        const resumed = await openStream(`${await listen(second)}/api/events`, { 'last-event-id': lastSeen });
        try {
          await resumed.until(withIds(2));
          expect(slugs(resumed)).toEqual(written.slice(2));
        } finally {
          resumed.close();
        }
      } finally {
        await second.close();
      }
    });
  });
}

describe('GET /api/events and the timeouts', () => {
  const defer = deferPerTest();

  it('keeps a stream open past the request and connection timeouts while its client reads', async () => {
    const timeouts = { HEADERS_TIMEOUT: '1s', REQUEST_TIMEOUT: '1s', CONNECTION_TIMEOUT: '2s', ...HEARTBEAT };
    const stream = await openStream(`${await listen(await sqliteAppWith(defer, timeouts))}/api/events`);
    defer(async () => stream.close());
    await stream.until((messages) => messages.filter((message) => message.comment === 'ping').length >= 4, 6000);
    expect(stream.messages[0]).toEqual({ retry: 3000 });
  });
});

describe('GET /api/events past the process-wide cap', () => {
  const defer = deferPerTest();

  it('answers 503 once EVENT_STREAMS_MAX streams are open, whoever asks, and takes one again when one closes', async () => {
    const base = await listen(await sqliteAppWith(defer, { EVENT_STREAMS_MAX: '2', EVENT_STREAMS_PER_CLIENT: '0' }));
    const streams = await Promise.all([1, 2].map(() => openStream(`${base}/api/events`)));
    defer(async () => {
      for (const stream of streams) stream.close();
    });
    await Promise.all(streams.map((stream) => stream.until((messages) => messages.length > 0)));
    const refused = await openStream(`${base}/api/events`);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toEqual({ errors: { streams: ['too many open, retry later'] } });

    streams[0]!.close();
    await expect
      .poll(async () => {
        const again = await openStream(`${base}/api/events`);
        again.close();
        return again.status;
      })
      .toBe(200);
  });
});

/**
 * Appends `count` public events of `type` to the outbox, each with `data` as its data, in statements of 20,000 (both
 * databases take a recursive WITH before an INSERT; more at once would outlast the statement timeout on PostgreSQL);
 * returns the id of the last, once the streams can read it.
 */
async function seedEvents(app: FastifyInstance, count: number, type: string, data: object): Promise<number> {
  for (let left = count; left > 0; left -= 20_000) {
    await sql`
      with recursive n(i) as (select 1 union all select i + 1 from n where i < ${Math.min(left, 20_000)})
      insert into events (type, public, data, created_at)
      select ${type}, 1, ${JSON.stringify(data)}, ${Date.now()} from n`.execute(app.db);
  }
  const newest = await app.db
    .selectFrom('events')
    .select((eb) => eb.fn.max('id').as('id'))
    .executeTakeFirstOrThrow();
  const last = Number(newest.id);
  // On PostgreSQL a stream reads only past the oldest transaction open anywhere on the server (events/stream.ts), and
  // other suites may hold one: until then, what a resume cannot see yet comes later as live events, outside its limits.
  await expect.poll(async () => (await readEventsById(app.db, last - 1, 1)).length, { timeout: 20_000 }).toBe(1);
  return last;
}

/** The events a stream sent, without the id line a replay that reached its limits ends with. */
const sentEvents = (stream: SseStream) => stream.events().filter((event) => event.envelope !== null);

/** What a replay that reached its limits ends with: where to go on from, as EventSource reads it. */
const resumeMarker = (stream: SseStream) => stream.messages.find((message) => message.id !== undefined && message.data === undefined);

describeEachDatabase(
  'GET /api/events resuming through a long outbox',
  (ctx) => {
    const defer = deferPerTest();
    let base = '';
    beforeAll(async () => {
      base = await listen(ctx().app);
    });

    async function resume(query: string): Promise<SseStream> {
      // The last test's streams gone, this one starts the poller at the head of the outbox: what was seeded before it is
      // the replay's, within its limits, and not live events the poller has yet to read.
      await expect.poll(() => ctx().app.events.open, { timeout: 10_000 }).toBe(0);
      const stream = await openStream(`${base}/api/events${query}`);
      defer(async () => stream.close());
      expect(stream.status).toBe(200);
      return stream;
    }

    it('reads at most EVENT_REPLAY_MAX_EVENTS a request, then gives the id it got to and ends; from there it goes on', async () => {
      const { app } = ctx();
      const start = await seedEvents(app, 1, 'article.updated', { article: { slug: 'before' } });
      const last = await seedEvents(app, 2_500, 'article.updated', { article: { slug: 'unwanted' } });

      const first = await resume(`?types=comment.deleted&lastEventId=${start}`);
      await first.ended;
      expect(sentEvents(first)).toEqual([]);
      expect(resumeMarker(first)).toEqual({ comment: expect.stringContaining(`Last-Event-ID ${start + 1_000}`), id: `${start + 1_000}` });

      const second = await resume(`?types=comment.deleted&lastEventId=${start + 1_000}`);
      await second.ended;
      expect(resumeMarker(second)?.id).toBe(`${start + 2_000}`);

      // The rest is under the limit: this one catches up and stays, live.
      const third = await resume(`?types=comment.deleted&lastEventId=${start + 2_000}`);
      await seedEvents(app, 1, 'comment.deleted', { article: { slug: 'wanted' }, comment: { id: 1 } });
      await third.until(withIds(1));
      expect(third.events().map((event) => [event.name, Number(event.id)])).toEqual([['comment.deleted', last + 1]]);
      expect(resumeMarker(third)).toBeUndefined();
    });

    it('does not spend its limit on events that are gone, as retention leaves them', async () => {
      const { app } = ctx();
      const start = await seedEvents(app, 1, 'article.updated', { article: { slug: 'before' } });
      const gone = await seedEvents(app, 2_500, 'article.updated', { article: { slug: 'gone' } });
      const wanted = await seedEvents(app, 1, 'comment.deleted', { article: { slug: 'wanted' }, comment: { id: 1 } });
      await app.db.deleteFrom('events').where('id', '>', start).where('id', '<=', gone).execute();

      const stream = await resume(`?types=comment.deleted&lastEventId=${start}`);
      await stream.until(withIds(1));
      expect(stream.events().map((event) => event.id)).toEqual([`${wanted}`]);
    });

    it('sends at most about EVENT_REPLAY_MAX_MB of missed events a request, then gives the id of the last one sent', async () => {
      const { app } = ctx();
      const start = await seedEvents(app, 1, 'article.updated', { article: { slug: 'before' } });
      const bulky = { article: { slug: 'bulky', body: 'x'.repeat(100 * 1024) } };
      await seedEvents(app, 30, 'article.updated', bulky);

      const stream = await resume(`?types=article.updated&lastEventId=${start}`);
      await stream.ended;
      const sent = sentEvents(stream);
      // Whole events only: the one that crosses the limit is the last.
      expect(sent.length).toBe(Math.ceil((1024 * 1024) / (100 * 1024 + 200)));
      expect(resumeMarker(stream)?.id).toBe(sent.at(-1)!.id);
    });
  },
  { EVENT_REPLAY_MAX_EVENTS: '1000', EVENT_REPLAY_MAX_MB: '1', OVERLOAD_EVENT_LOOP_DELAY_MS: '0' },
);

describeEachDatabase(
  'GET /api/events resuming through a long outbox, meanwhile',
  (ctx) => {
    const defer = deferPerTest();

    it('serves other requests while a resume goes through events it does not want', { timeout: 30_000 }, async () => {
      const { app } = ctx();
      const base = await listen(app);
      const start = await seedEvents(app, 1, 'article.updated', { article: { slug: 'before' } });
      await seedEvents(app, 100_000, 'article.updated', { article: { slug: 'unwanted' } });
      const wanted = await seedEvents(app, 1, 'comment.deleted', { article: { slug: 'wanted' }, comment: { id: 1 } });

      const resumed = await openStream(`${base}/api/events?types=comment.deleted&lastEventId=${start}`);
      defer(async () => resumed.close());
      expect(resumed.status).toBe(200);
      const order: string[] = [];
      const bystander = fetch(`${base}/api/tags`).then((response) => order.push(`bystander ${response.status}`));
      await resumed.until(withIds(1), 20_000);
      order.push(`resume ${resumed.events()[0]?.id}`);
      await bystander;
      // On SQLite the outbox is read on the event loop: only if it lets go between reads does the bystander get in.
      expect(order).toEqual(['bystander 200', `resume ${wanted}`]);
    });
  },
  // Seeding blocks the event loop for a while, which the overload guard would hold against the requests after it.
  { EVENT_REPLAY_MAX_EVENTS: '200000', OVERLOAD_EVENT_LOOP_DELAY_MS: '0' },
);

/** A stream whose client sends its request and then never reads: what the server sends piles up in its buffers. */
async function neverReading(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.pause();
  socket.write('GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  return socket;
}

describe('the buffer budget of all the streams of a process', () => {
  const stream = (backlog: number) => ({ backlog: () => backlog, cut: vi.fn(), set: (bytes: number) => (backlog = bytes) });

  it('cuts the streams holding the most until the rest fit, measuring them afresh first', () => {
    const budget = new BufferBudget(14);
    const streams = [stream(1), stream(5), stream(3), stream(4)];
    const [, large, middle, drained] = streams;
    for (const each of streams) budget.charge(each);
    expect(budget.held()).toBe(13);
    // The last one's client has read since it wrote: the 4 bytes recorded for it are gone, and 12 fit.
    drained!.set(0);
    middle!.set(6);
    budget.charge(middle!);
    expect(streams.map((each) => each.cut.mock.calls.length)).toEqual([0, 0, 0, 0]);

    large!.set(9);
    budget.charge(large!);
    expect(streams.map((each) => each.cut.mock.calls.length)).toEqual([0, 1, 0, 0]);
    expect(budget.held()).toBe(7);
  });
});

describe('GET /api/events and clients that never read', () => {
  const defer = deferPerTest();

  it('keeps the bytes all streams hold under EVENT_STREAMS_BUFFER_MB, the largest cut first, and a reader gets everything', async () => {
    const budget = 2 * 1024 * 1024;
    const app = await sqliteAppWith(defer, {
      EVENT_STREAMS_BUFFER_MB: '2',
      EVENT_STREAMS_PER_CLIENT: '0',
      OVERLOAD_EVENT_LOOP_DELAY_MS: '0',
    });
    const base = await listen(app);
    const gauge = async (name: string) =>
      Number(new RegExp(`^${name} (\\d+)$`, 'm').exec((await app.inject({ method: 'GET', url: '/metrics' })).body)?.[1]);

    const idle = await Promise.all([1, 2, 3, 4].map(() => neverReading((app.server.address() as AddressInfo).port)));
    defer(async () => {
      for (const socket of idle) socket.destroy();
    });
    const reader = await openStream(`${base}/api/events`);
    defer(async () => reader.close());
    await expect.poll(() => gauge('conduit_event_streams_open')).toBe(5);

    const author = await registerUser(app, 'bulky');
    let mostHeld = 0;
    for (let i = 0; i < 60; i++) {
      // Each event carries the whole article: about 100 KB.
      await createArticle(app, author.token, { body: 'x'.repeat(99_000) });
      mostHeld = Math.max(mostHeld, await gauge('conduit_event_stream_buffered_bytes'));
    }
    await reader.until(withIds(60), 20_000);
    expect(reader.events().map((event) => event.envelope.data.article.author.username)).toEqual(Array(60).fill(author.username));
    expect(mostHeld).toBeGreaterThan(0);
    expect(mostHeld).toBeLessThanOrEqual(budget);
    // Some of the idle ones had to go for the budget to hold; the reader was never among them.
    expect(await gauge('conduit_event_streams_open')).toBeLessThan(5);
  });
});

const POSTGRES = Boolean(process.env.TEST_DATABASE_URL);

describe.skipIf(!POSTGRES)('GET /api/events on two server processes sharing PostgreSQL', () => {
  let scratch: ScratchDatabase | undefined;
  const servers: RunningServer[] = [];
  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
    const env = childEnv(scratch.url);
    servers.push(...(await Promise.all([startServer(SERVER_ENTRY, [], env), startServer(SERVER_ENTRY, [], env)])));
  });
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await scratch?.drop();
  });

  it("delivers a write on one instance to the other's streams within two seconds", async () => {
    const [a, b] = servers.map((server) => server.base) as [string, string];
    const username = unique('twin');
    const user = { username, email: `${username}@example.com`, password: 'password123' };
    const token: string = (await request(a, 'POST', '/api/users', { body: { user } })).body.user.token;
    const stream = await openStream(`${b}/api/events`);
    try {
      await stream.until((messages) => messages.length > 0);
      for (let i = 1; i <= 3; i++) {
        const written = Date.now();
        const body = { article: { title: `Across ${username} ${i}`, description: 'd', body: 'b' } };
        expect((await request(a, 'POST', '/api/articles', { token, body })).status).toBe(201);
        await stream.until(withIds(i), 2000);
        expect(Date.now() - written).toBeLessThan(2000);
      }
    } finally {
      stream.close();
    }
  });
});

describe('GET /api/events behind a WORKERS cluster on SQLite', () => {
  const defer = deferPerTest();

  it('gives every stream every event, whichever worker took the write or holds the stream', { timeout: 60_000 }, async () => {
    const scratch = await createScratchDatabase('sqlite');
    defer(() => scratch.drop());
    const cluster = await startServer(
      CONDUIT_BIN,
      ['serve', '--workers', '2'],
      childEnv(scratch.url, { ...NO_RATE_LIMITS, LOG_LEVEL: 'info' }),
    );
    defer(() => cluster.stop('SIGTERM'));
    // Each worker logs when it listens: both are taking connections before the streams open.
    const deadline = Date.now() + 30_000;
    while ((cluster.output().match(/Conduit listening on/g) ?? []).length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const username = unique('cluster');
    const user = { username, email: `${username}@example.com`, password: 'password123' };
    const token: string = (await request(cluster.base, 'POST', '/api/users', { body: { user } })).body.user.token;

    // The primary hands connections to the workers in turn: four streams are held by both of them.
    const streams = await Promise.all([1, 2, 3, 4].map(() => openStream(`${cluster.base}/api/events?author=${username}`)));
    defer(async () => {
      for (const stream of streams) stream.close();
    });
    await Promise.all(streams.map((stream) => stream.until((messages) => messages.length > 0)));
    const titles: string[] = [];
    for (let i = 1; i <= 6; i++) {
      titles.push(`Clustered ${username} ${i}`);
      const body = { article: { title: titles.at(-1), description: 'd', body: 'b' } };
      // A new connection each time, so that the writes too land on both workers.
      const response = await request(cluster.base, 'POST', '/api/articles', { token, body, headers: { connection: 'close' } });
      expect(response.status).toBe(201);
    }
    for (const stream of streams) {
      await stream.until(withIds(6), 5_000);
      expect(stream.events().map((event) => event.envelope.data.article.title)).toEqual(titles);
    }
  });
});

describe("one client's streams across a WORKERS=2 cluster, counted in the primary", () => {
  const PER_CLIENT = 3;
  const defer = deferPerTest();
  let scratch: ScratchDatabase | undefined;
  let cluster: RunningServer | undefined;

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    // Behind one trusted proxy, each test names a client address of its own (X-Forwarded-For), so that none waits for
    // the places of the test before it to come back.
    const settings = { ...NO_RATE_LIMITS, EVENT_STREAMS_PER_CLIENT: String(PER_CLIENT), TRUST_PROXY: '1', LOG_LEVEL: 'info' };
    cluster = await startServer(CONDUIT_BIN, ['serve', '--workers', '2'], childEnv(scratch.url, settings));
    await vi.waitFor(() => expect(workerPids()).toHaveLength(2), { timeout: 30_000, interval: 50 });
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop('SIGKILL');
    await scratch?.drop();
  });

  /** The output's JSON log lines. */
  const logLines = () =>
    cluster!
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line));
  const workerPids = (): number[] => logLines().flatMap((line) => (/^Conduit listening on/.test(line.msg) ? [line.pid] : []));

  /** A stream from `client`, on a connection of its own, open or refused. */
  async function streamFrom(client: string): Promise<SseStream> {
    const stream = await openStream(`${cluster!.base}/api/events`, { 'x-forwarded-for': client });
    defer(async () => stream.close());
    if (stream.status === 200) await stream.until((messages) => messages.length > 0);
    return stream;
  }
  const oneAfterAnother = async (client: string, count: number) => {
    const streams: SseStream[] = [];
    for (let i = 0; i < count; i++) streams.push(await streamFrom(client));
    return streams;
  };

  it('lets a client hold EVENT_STREAMS_PER_CLIENT streams in all, whichever worker holds each, and frees a place when one closes', async () => {
    const client = '203.0.113.1';
    const streams = await oneAfterAnother(client, PER_CLIENT + 2);
    expect(streams.map((stream) => stream.status)).toEqual([200, 200, 200, 429, 429]);
    for (const refused of streams.slice(PER_CLIENT)) {
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toEqual({ errors: { rate: ['limit exceeded'] } });
    }

    streams[0]!.close();
    // Given back once the worker has seen the stream go: until then the client still holds every place.
    await vi.waitFor(async () => expect((await streamFrom(client)).status).toBe(200), { timeout: 5000, interval: 100 });
    expect((await streamFrom(client)).status).toBe(429);

    // The open streams were held by both workers: their request lines, logged as each ends, say which.
    const held = new Set(streams.slice(0, PER_CLIENT).map((stream) => stream.headers.get('x-request-id')));
    for (const stream of streams) stream.close();
    const holders = () => new Set(logLines().flatMap((line) => (held.has(line.reqId) ? [line.pid] : [])));
    await vi.waitFor(() => expect(holders().size).toBe(2), { timeout: 5000, interval: 100 });
  });

  it("gives back the places of a worker killed with streams open, whatever the client's other streams", async () => {
    const client = '203.0.113.2';
    const streams = await oneAfterAnother(client, PER_CLIENT + 1);
    expect(streams.map((stream) => stream.status)).toEqual([200, 200, 200, 429]);
    streams.pop();
    const ended = new Set<SseStream>();
    for (const stream of streams) void stream.ended.then(() => ended.add(stream));

    // Connections go to the workers in turn: whichever is killed held one or two of the three streams.
    const [killed] = workerPids();
    process.kill(killed!, 'SIGKILL');
    await vi.waitFor(() => expect(cluster!.output()).toContain(`worker ${killed} died`), { timeout: 5000, interval: 50 });
    await vi.waitFor(() => expect(ended.size).toBeGreaterThan(0), { timeout: 5000, interval: 50 });
    expect(ended.size).toBeLessThan(PER_CLIENT);

    // The primary gave them back as the worker exited; the streams on the other worker still hold theirs.
    const reopened = await oneAfterAnother(client, ended.size + 1);
    expect(reopened.map((stream) => stream.status)).toEqual([...Array(ended.size).fill(200), 429]);
  });
});
