import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe } from 'vitest';
import { buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/index.js';
import { migrateToLatest } from '../../src/db/migrate.js';

export type DatabaseKind = 'sqlite' | 'postgres';

const POSTGRES_URL = process.env.TEST_DATABASE_URL;
/**
 * Set when TEST_DATABASE_URL goes through a pooler in transaction mode (scripts/pgbouncer.sh): the same PostgreSQL
 * straight, for what a pooler cannot carry. The apps then run as a deployment behind PgBouncer 1.18 would.
 */
const POSTGRES_DIRECT_URL = process.env.TEST_DATABASE_DIRECT_URL;
/** TEST_DATABASES=postgres runs only the PostgreSQL half of the suites that run on both (a second pass, through a pooler). */
const ONLY = process.env.TEST_DATABASES?.split(',').map((kind) => kind.trim());
export const DATABASES: DatabaseKind[] = (POSTGRES_URL ? (['sqlite', 'postgres'] as const) : (['sqlite'] as const)).filter(
  (kind) => ONLY === undefined || ONLY.includes(kind),
);
export const BEHIND_POOLER = Boolean(POSTGRES_URL && POSTGRES_DIRECT_URL);

export const TEST_SECRET = 'test-secret-that-is-long-enough-for-hs256-0123456789';

/** A throwaway database: a SQLite file in a temp folder, or a fresh PostgreSQL database next to TEST_DATABASE_URL. */
export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** `url`, a database next to TEST_DATABASE_URL, straight to PostgreSQL when the suite runs through a pooler. */
export function directUrl(url: string): string {
  if (!BEHIND_POOLER || !POSTGRES_URL || !POSTGRES_DIRECT_URL || !url.startsWith('postgres')) return url;
  const target = new URL(url);
  if (target.host !== new URL(POSTGRES_URL).host) return url;
  const direct = new URL(POSTGRES_DIRECT_URL);
  direct.pathname = target.pathname;
  return direct.toString();
}

/** The settings of an app on `url` behind the suite's pooler, if any: PgBouncer 1.18 keeps no named statements. */
export function poolerSettings(url: string): Record<string, string> {
  const direct = directUrl(url);
  return direct === url ? {} : { DATABASE_DIRECT_URL: direct, DATABASE_PREPARED_STATEMENTS: 'off' };
}

/**
 * One client on TEST_DATABASE_URL's database (or on `url`) for the duration of `work`. Straight to PostgreSQL past
 * the suite's pooler, if any: what it sets on its session is its own, as a database administrator's would be.
 */
export async function withAdmin<T>(work: (client: pg.Client) => Promise<T>, url = POSTGRES_URL): Promise<T> {
  const client = new pg.Client({ connectionString: url && directUrl(url) });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function createScratchDatabase(kind: DatabaseKind): Promise<ScratchDatabase> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(path.join(tmpdir(), 'conduit-test-'));
    return { url: `sqlite:${path.join(dir, 'test.db')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  if (!POSTGRES_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `conduit_test_${randomBytes(6).toString('hex')}`;
  await withAdmin((client) => client.query(`create database ${name}`));
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withAdmin((client) => client.query(`drop database if exists ${name} with (force)`)).then(() => {}),
  };
}

export function testConfig(databaseUrl: string, overrides: Record<string, string> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    JWT_SECRET: TEST_SECRET,
    DATABASE_URL: databaseUrl,
    ...poolerSettings(databaseUrl),
    DATA_DIR: path.join(tmpdir(), 'conduit-test-data'),
    // The suites send hundreds of requests and registrations a minute from one address; the limits have tests of their own.
    RATE_LIMIT_MAX: '0',
    WRITE_RATE_LIMIT_MAX: '0',
    AUTH_RATE_LIMIT_MAX: '0',
    AUTH_ADDRESS_RATE_LIMIT_MAX: '0',
    // A loaded test machine lags the event loop past the guard's second, and the suites' requests would get 503s.
    OVERLOAD_EVENT_LOOP_DELAY_MS: '0',
    ...overrides,
  });
}

/**
 * A handle on the database at `url` for the duration of `work`, as a tool beside the servers would open one: straight
 * to PostgreSQL past the suite's pooler, if any, as the `conduit` commands go (DATABASE_DIRECT_URL).
 */
export async function withDatabase<T>(url: string, work: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const handle = openDatabase(testConfig(directUrl(url)).database);
  try {
    return await work(handle);
  } finally {
    await handle.destroy();
  }
}

/**
 * A handle on a scratch database of `kind` for the enclosing describe: opened (and migrated, unless `migrate` is
 * false) before its tests, closed and dropped after them. Call it at the top of the describe, before its own hooks.
 * Straight to PostgreSQL past the suite's pooler, if any: the tests run the migrator on it, which the server runs
 * on DATABASE_DIRECT_URL.
 */
export function scratchHandle(kind: DatabaseKind, { migrate = true } = {}): () => DatabaseHandle {
  let scratch: ScratchDatabase | undefined;
  let handle: DatabaseHandle | undefined;
  beforeAll(async () => {
    scratch = await createScratchDatabase(kind);
    handle = openDatabase(testConfig(directUrl(scratch.url)).database);
    if (migrate) await migrateToLatest(handle);
  });
  afterAll(async () => {
    await handle?.destroy();
    await scratch?.drop();
  });
  return () => handle!;
}

export type Defer = (cleanup: () => Promise<unknown>) => void;

/** Returns `defer`: what a test hands it runs after that test, newest first. */
export function deferPerTest(): Defer {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return (cleanup) => cleanups.push(cleanup);
}

/** An app with settings of its own (on top of `testConfig`'s) on a throwaway SQLite database, both gone after the test. */
export async function sqliteAppWith(defer: Defer, overrides: Record<string, string>): Promise<FastifyInstance> {
  const scratch = await createScratchDatabase('sqlite');
  defer(() => scratch.drop());
  const app = await buildApp(testConfig(scratch.url, overrides));
  defer(() => app.close());
  return app;
}

export interface TestContext {
  kind: DatabaseKind;
  app: FastifyInstance;
  databaseUrl: string;
}

/**
 * Runs a suite once per configured database against the real app on a fresh database of its own:
 * always SQLite, and PostgreSQL when TEST_DATABASE_URL is set. `overrides` are settings on top of `testConfig`'s.
 */
export function describeEachDatabase(
  title: string,
  suite: (context: () => TestContext) => void,
  overrides: Record<string, string> = {},
): void {
  for (const kind of DATABASES) {
    describe(`${title} [${kind}]`, () => {
      let context: TestContext | undefined;
      let scratch: ScratchDatabase | undefined;
      beforeAll(async () => {
        scratch = await createScratchDatabase(kind);
        const app = await buildApp(testConfig(scratch.url, overrides));
        context = { kind, app, databaseUrl: scratch.url };
      });
      afterAll(async () => {
        await context?.app.close();
        await scratch?.drop();
      });
      suite(() => {
        if (context === undefined) throw new Error('the test app is not ready');
        return context;
      });
    });
  }
}
