import { type AddressInfo, createServer, type Socket } from 'node:net';
import { inspect } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { openDatabase } from '../src/db/index.js';
import { isUnavailable } from '../src/db/unavailable.js';
import { createScratchDatabase, testConfig } from './support/app.js';
import { call, unique } from './support/client.js';
import { POSTGRES_BIN, startThrowawayPostgres, type ThrowawayPostgres } from './support/postgres.js';
import { childEnv, NO_RATE_LIMITS, type RunningServer, request, SERVER_ENTRY, startServer } from './support/processes.js';

const UNAVAILABLE = { errors: { database: ['unavailable'] } };
const RETRY_AFTER = '5';
/** How soon after PostgreSQL accepts connections again every client must be served again. */
const RECOVERY_LIMIT_MS = 5000;

const newUser = () => {
  const username = unique('outage');
  return { user: { username, email: `${username}@example.com`, password: 'password123' } };
};

describe('what counts as the database being unavailable', () => {
  it('is a lost or refused connection, a server shutting down or starting, or a lock held too long', () => {
    const unavailable = [
      { code: '08006' },
      { code: '08001' },
      { code: '57P01' },
      { code: '57P02' },
      { code: '57P03' },
      { code: 'ECONNREFUSED' },
      { code: 'ECONNRESET' },
      { code: 'SQLITE_BUSY' },
      { code: 'SQLITE_BUSY_SNAPSHOT' },
      { code: 'SQLITE_LOCKED' },
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ];
    for (const error of unavailable) expect(isUnavailable(error), inspect(error)).toBe(true);
  });

  it('is not a broken rule, a deadlock, a bug or a closed pool: those stay what they are', () => {
    const others = [
      { code: '23505' },
      { code: '40P01' },
      { code: '42P01' },
      { code: 'SQLITE_CONSTRAINT_UNIQUE' },
      { code: 'SQLITE_ERROR' },
      new Error('Cannot use a pool after calling end on the pool'),
      new TypeError('Cannot read properties of undefined'),
      'ECONNREFUSED',
      null,
    ];
    for (const error of others) expect(isUnavailable(error), inspect(error)).toBe(false);
  });
});

describe('requests while another process holds the SQLite write lock', () => {
  it('reads go on; a write is 503 with Retry-After once the busy timeout runs out, and succeeds once the lock is gone', async () => {
    const scratch = await createScratchDatabase('sqlite');
    const app = await buildApp(testConfig(scratch.url));
    const holder = new BetterSqlite3(scratch.url.slice('sqlite:'.length));
    try {
      holder.exec('begin immediate');
      expect((await call(app, 'GET', '/api/tags')).status).toBe(200);

      const started = Date.now();
      const blocked = await call(app, 'POST', '/api/users', { body: newUser() });
      expect(blocked.status).toBe(503);
      expect(blocked.body).toEqual(UNAVAILABLE);
      expect(blocked.headers['retry-after']).toBe(RETRY_AFTER);
      // SQLite's busy timeout (5 s) is what gave up, not anything sooner.
      expect(Date.now() - started).toBeGreaterThanOrEqual(4900);

      holder.exec('commit');
      expect((await call(app, 'POST', '/api/users', { body: newUser() })).status).toBe(201);
    } finally {
      holder.close();
      await app.close();
      await scratch.drop();
    }
  });
});

describe('requests to a PostgreSQL address that accepts connections and never answers', () => {
  it('fail with 503 after the connect timeout instead of hanging, queued ones too', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `postgres://conduit@127.0.0.1:${(silent.address() as AddressInfo).port}/conduit`;
    const connectTimeoutMs = 500;
    // Two connections: one for reads, so four of the five requests wait in the read pool's queue rather than connecting.
    const database = openDatabase({
      kind: 'postgres',
      url,
      poolSize: 2,
      connectTimeoutMs,
      statementTimeoutMs: 0,
      directUrl: url,
      preparedStatements: true,
    });
    // Not migrated: the app could not, and the route under test needs only a connection to fail on.
    const app = await buildApp(testConfig(url), { database, migrate: false });
    try {
      const started = Date.now();
      const responses = await Promise.all(Array.from({ length: 5 }, () => call(app, 'GET', '/api/articles')));
      const elapsed = Date.now() - started;
      for (const response of responses) {
        expect(response.status).toBe(503);
        expect(response.body).toEqual(UNAVAILABLE);
        expect(response.headers['retry-after']).toBe(RETRY_AFTER);
      }
      expect(elapsed).toBeGreaterThanOrEqual(connectTimeoutMs - 50);
      expect(elapsed).toBeLessThan(connectTimeoutMs + 1000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
      await app.close();
      await database.destroy();
    }
  });
});

/** One answer the load got: when it was sent and answered, and what it said (status 0: no HTTP answer at all). */
interface Outcome {
  sent: number;
  done: number;
  client: number;
  status: number;
  body: unknown;
  retryAfter: string | null;
}

/** Clients each creating articles, commenting, favoriting and reading in a loop, as fast as answers come. */
function driveLoad(base: string, tokens: string[], slug: string) {
  const outcomes: Outcome[] = [];
  let running = true;
  const send = async (client: number, method: string, url: string, token: string, body?: unknown) => {
    const sent = Date.now();
    try {
      const response = await request(base, method, url, { token, body });
      outcomes.push({
        sent,
        done: Date.now(),
        client,
        status: response.status,
        body: response.body,
        retryAfter: response.headers.get('retry-after'),
      });
    } catch (error) {
      outcomes.push({ sent, done: Date.now(), client, status: 0, body: String(error), retryAfter: null });
      // The server is gone; slow down rather than spin on refused connections.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const loops = tokens.map(async (token, client) => {
    for (let round = 0; running; round++) {
      const article = {
        title: unique('Outage '),
        description: 'Under load',
        body: 'Written while the database may be down',
        tagList: ['outage', `client${client}`],
      };
      await send(client, 'POST', '/api/articles', token, { article });
      await send(client, 'POST', `/api/articles/${slug}/comments`, token, { comment: { body: `round ${round}` } });
      await send(client, round % 2 === 0 ? 'POST' : 'DELETE', `/api/articles/${slug}/favorite`, token);
      await send(client, 'GET', '/api/articles?limit=5', token);
      await send(client, 'GET', `/api/articles/${slug}`, token);
    }
  });
  return {
    outcomes,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const succeeded = (outcome: Outcome) => outcome.status >= 200 && outcome.status < 300;

const missing = POSTGRES_BIN === null ? 'no initdb under /usr/lib/postgresql/*/bin (apt-get install -y postgresql)' : null;
// Locally a missing PostgreSQL is a reason to skip, said out loud; in CI it must fail, never pass unseen.
if (missing !== null && !process.env.CI) console.warn(`\n[conduit] database outage test SKIPPED: ${missing}\n`);

describe.skipIf(missing !== null && !process.env.CI)('the real server while its PostgreSQL stops and starts again', () => {
  const CLIENTS = 6;
  let cluster: ThrowawayPostgres | undefined;
  let server: RunningServer | undefined;
  const tokens: string[] = [];
  let slug = '';

  beforeAll(async () => {
    if (missing !== null) throw new Error(`${missing}; CI must install it`);
    cluster = await startThrowawayPostgres();
    // Warnings on: the lost connections must be logged, and the log explains a failure.
    server = await startServer(SERVER_ENTRY, [], childEnv(cluster.url, { ...NO_RATE_LIMITS, LOG_LEVEL: 'warn' }));
    for (let i = 0; i < CLIENTS; i++) {
      const registered = await request(server.base, 'POST', '/api/users', { body: newUser() });
      tokens.push(registered.body.user.token);
    }
    const created = await request(server.base, 'POST', '/api/articles', {
      token: tokens[0],
      body: { article: { title: 'Shared', description: 'Commented on by all', body: 'Body', tagList: ['outage'] } },
    });
    slug = created.body.article.slug;
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await cluster?.destroy();
  });

  it.each(['fast', 'immediate'] as const)(
    'answers 503 with Retry-After and never a 500 or a crash during a %s shutdown, and serves again by itself',
    async (mode) => {
      const running = server!;
      const logged = running.output().length;
      const load = driveLoad(running.base, tokens, slug);
      await sleep(1000);
      const before = load.outcomes.length;

      await cluster!.stop(mode);
      const stoppedAt = Date.now();
      await sleep(1000);
      const ready = await request(running.base, 'GET', '/health/ready');
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual(UNAVAILABLE);
      expect(ready.headers.get('retry-after')).toBe(RETRY_AFTER);
      expect((await request(running.base, 'GET', '/health/live')).status).toBe(200);
      await sleep(500);

      const restarting = Date.now();
      await cluster!.start();
      // pg_ctl polls, so PostgreSQL may take its first queries a little before this.
      const restartedAt = Date.now();
      // Served again means every client got a success for a request sent after the restart.
      const servedAgain = () =>
        tokens.every((_, client) => load.outcomes.some((o) => o.client === client && o.sent >= restartedAt && succeeded(o)));
      while (!servedAgain() && Date.now() - restartedAt < 2 * RECOVERY_LIMIT_MS) await sleep(20);
      await sleep(500);
      await load.stop();

      const { outcomes } = load;
      const failures = outcomes.filter((outcome) => !succeeded(outcome));
      const unexpected = failures.filter(
        (o) => o.status !== 503 || JSON.stringify(o.body) !== JSON.stringify(UNAVAILABLE) || o.retryAfter !== RETRY_AFTER,
      );
      expect(unexpected, `answers other than success or the contract's 503:\n${running.output().slice(-4000)}`).toEqual([]);
      expect(running.child.exitCode).toBeNull();
      expect(running.child.signalCode).toBeNull();

      const duringOutage = outcomes.filter((o) => o.sent >= stoppedAt && o.done <= restarting);
      expect(duringOutage.length).toBeGreaterThan(0);
      expect(duringOutage.filter((o) => o.status !== 503)).toEqual([]);
      const lastFailure = Math.max(...failures.map((o) => o.done));
      const firstSuccess = Math.min(...outcomes.filter((o) => o.sent > restarting && succeeded(o)).map((o) => o.done));
      const slowest503 = Math.max(...failures.map((o) => o.done - o.sent));
      console.log(
        `[outage ${mode}] ${outcomes.length} requests from ${CLIENTS} clients (${before} before the stop, all 2xx); ` +
          `${failures.length} answered 503, 0 anything else; slowest 503 took ${slowest503} ms; ` +
          `PostgreSQL took ${restartedAt - restarting} ms to start again; first success ${firstSuccess - restarting} ms ` +
          `after the start began; last 503 ${lastFailure - restartedAt} ms after pg_ctl reported it ready (negative: before)`,
      );
      expect(outcomes.slice(0, before).every(succeeded)).toBe(true);
      expect(servedAgain()).toBe(true);
      expect(lastFailure - restartedAt).toBeLessThan(RECOVERY_LIMIT_MS);
      expect((await request(running.base, 'GET', '/health/ready')).status).toBe(200);
      expect(running.output().slice(logged)).toContain('lost a database connection');
    },
    60_000,
  );
});
