import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { openDatabase } from '../src/db/index.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { purgeAccount } from '../src/modules/users/purge.js';
import { createScratchDatabase, DATABASES, directUrl, type ScratchDatabase, testConfig, withAdmin } from './support/app.js';
import { call, registerUser } from './support/client.js';
import { lockTable, lockWaiter } from './support/locks.js';
import { childEnv, runConduit } from './support/processes.js';

/** The shortest the setting takes: a statement held by a lock gives up within a test's time. */
const TIMEOUT = { DATABASE_STATEMENT_TIMEOUT: '1' };
/** Longer than TIMEOUT, for the work that must outlast it. */
const PAST_THE_TIMEOUT_MS = 1500;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `promise`, or a failure once it has taken `ms`: without a timeout, the statement would wait as long as the lock. */
const within = <T>(ms: number, promise: Promise<T>) =>
  Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`still waiting after ${ms} ms`)))]);

describe.skipIf(!DATABASES.includes('postgres'))('DATABASE_STATEMENT_TIMEOUT on PostgreSQL', () => {
  let scratch: ScratchDatabase;
  let app: FastifyInstance;
  /** Straight to PostgreSQL, past the suite's pooler if any: through one, the timeout is not sent (below). */
  let url: string;

  /** What `start` resolves to when its statement on `table` has waited for a lock longer than TIMEOUT. */
  async function heldPastTheTimeout<T>(table: string, start: () => Promise<T>): Promise<T> {
    const lock = await lockTable(scratch.url, table);
    await lock.granted;
    const outcome = start();
    try {
      await lockWaiter(scratch.url, { pattern: `%${table}%` });
      await sleep(PAST_THE_TIMEOUT_MS);
    } finally {
      await lock.release();
    }
    return outcome;
  }

  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
    url = directUrl(scratch.url);
    app = await buildApp(testConfig(url, TIMEOUT));
  });
  afterAll(async () => {
    await app?.close();
    await scratch?.drop();
  });

  it('answers 503 with Retry-After to a request whose statement waits past it, and the connection serves on', async () => {
    const lock = await lockTable(scratch.url, 'tags');
    await lock.granted;
    try {
      const response = await within(4000, call(app, 'GET', '/api/tags'));
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ errors: { database: ['unavailable'] } });
      expect(response.headers['retry-after']).toBe('5');
    } finally {
      await lock.release();
    }
    expect((await call(app, 'GET', '/api/tags')).status).toBe(200);
  });

  it('leaves migrations unbounded: one that waits past it still runs, and the timeout is back afterwards', async () => {
    const database = openDatabase(testConfig(url, TIMEOUT).database);
    try {
      expect(await heldPastTheTimeout('kysely_migration', () => migrateToLatest(database))).toEqual([]);
      // The migration's connection went back to the pool that serves requests: its timeout must be there again.
      const { rows } = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(database.db);
      expect(rows).toEqual([{ statement_timeout: '1s' }]);
    } finally {
      await database.destroy();
    }
  });

  it('leaves an account purge unbounded, and the timeout is back afterwards', async () => {
    const leaver = await registerUser(app, 'leaver');
    // Due only by the clock given to the purge, so that the app's own purge pass leaves the account to this one.
    const due = Date.now() + 60 * 60 * 1000;
    const database = openDatabase(testConfig(url, TIMEOUT).database);
    try {
      const { id } = await database.db
        .updateTable('users')
        .set({ purge_at: due })
        .where('username', '=', leaver.username)
        .returning('id')
        .executeTakeFirstOrThrow();
      expect(await heldPastTheTimeout('idempotency_keys', () => purgeAccount(database.db, id, due))).toBe(true);
      const { rows } = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(database.db);
      expect(rows).toEqual([{ statement_timeout: '1s' }]);
    } finally {
      await database.destroy();
    }
  });

  it('leaves the conduit commands unbounded', async () => {
    const result = await heldPastTheTimeout('kysely_migration', () => runConduit(['migrate', 'status'], childEnv(url, TIMEOUT)));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^applied {2}0001_initial /);
  });
});

describe.skipIf(!DATABASES.includes('postgres'))('DATABASE_STATEMENT_TIMEOUT behind a pooler (DATABASE_DIRECT_URL set apart)', () => {
  it('is not sent, which PgBouncer would refuse: the sessions keep the timeout the database gives them', async () => {
    const scratch = await createScratchDatabase('postgres');
    const direct = directUrl(scratch.url);
    // Through the suite's pooler when it has one; else the same database under another address, all the server can tell.
    const pooled = direct === scratch.url ? `${scratch.url}?application_name=conduit-pooled` : scratch.url;
    const app = await buildApp(testConfig(pooled, { ...TIMEOUT, DATABASE_DIRECT_URL: direct }));
    try {
      const { rows } = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(app.db);
      const own = await withAdmin((client) => client.query<{ statement_timeout: string }>('show statement_timeout'), direct);
      expect(rows).toEqual(own.rows);
      expect((await call(app, 'GET', '/api/tags')).status).toBe(200);
    } finally {
      await app.close();
      await scratch.drop();
    }
  });
});
