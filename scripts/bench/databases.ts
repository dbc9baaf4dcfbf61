import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import type { DatabaseConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/index.js';
import type { Progress } from './progress.js';
import { migrate, seedDatabase } from './seed.js';
import { SCALES, type ScaleName, SEED_VERSION } from './seed-data.js';

export type DatabaseKind = 'sqlite' | 'postgres';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Gitignored: seeded databases, run folders and results. */
export const BENCH_DIR = path.join(PROJECT_ROOT, '.bench');

export interface BenchDatabase {
  kind: DatabaseKind;
  scale: ScaleName;
  /** The server's DATABASE_URL. */
  url: string;
  config: DatabaseConfig;
  /** For PostgreSQL: the server whose own database is used only to create and drop ours. */
  adminUrl?: string;
}

const MARKER_TABLE = 'bench_seed';

/** Where a scale lives: a file in .bench/, or a database of its own next to the given PostgreSQL URL. */
export function locate(kind: DatabaseKind, scale: ScaleName, postgresUrl?: string): BenchDatabase {
  if (kind === 'sqlite') {
    const file = path.join(BENCH_DIR, `${scale}.sqlite`);
    // A seed cut short by a crash lacks its marker and is seeded again, so it need not wait for each sync.
    return { kind, scale, url: `sqlite:${file}`, config: { kind, file, synchronous: 'normal' } };
  }
  if (postgresUrl === undefined) throw new Error('PostgreSQL needs --postgres-url or BENCH_DATABASE_URL');
  const url = benchDatabaseOn(postgresUrl, scale);
  return {
    kind,
    scale,
    url,
    // Seeding a million articles runs statements for minutes, as `conduit seed` does.
    config: {
      kind,
      url,
      poolSize: 2,
      connectTimeoutMs: 10_000,
      statementTimeoutMs: 0,
      directUrl: url,
      preparedStatements: true,
    },
    adminUrl: postgresUrl,
  };
}

const postgresName = (scale: ScaleName) => `conduit_bench_${scale}`;

/** The scale's database on the PostgreSQL server of `serverUrl` (the primary's, or a replica's): its own database swapped for ours. */
export function benchDatabaseOn(serverUrl: string, scale: ScaleName): string {
  const url = new URL(serverUrl);
  url.pathname = `/${postgresName(scale)}`;
  return url.toString();
}

async function withAdmin<T>(database: BenchDatabase, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: database.adminUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function exists(database: BenchDatabase): Promise<boolean> {
  if (database.config.kind === 'sqlite') return existsSync(database.config.file);
  const name = postgresName(database.scale);
  return withAdmin(database, async (client) => (await client.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1);
}

/** True when a seed of this scale by this version of the generator ran to its end (the marker is written last). */
async function isSeeded(database: BenchDatabase): Promise<boolean> {
  if (!(await exists(database))) return false;
  const handle = openDatabase(database.config);
  try {
    const tables = await handle.db.introspection.getTables();
    if (!tables.some((table) => table.name === MARKER_TABLE)) return false;
    const { rows } = await sql<{ version: number }>`select version from ${sql.table(MARKER_TABLE)} where scale = ${database.scale}`.execute(
      handle.db,
    );
    return rows[0]?.version === SEED_VERSION;
  } finally {
    await handle.destroy();
  }
}

async function markSeeded(database: BenchDatabase): Promise<void> {
  const handle = openDatabase(database.config);
  try {
    await sql`create table ${sql.table(MARKER_TABLE)} (scale text not null, version integer not null, seeded_at bigint not null)`.execute(
      handle.db,
    );
    await sql`insert into ${sql.table(MARKER_TABLE)} values (${database.scale}, ${SEED_VERSION}, ${Date.now()})`.execute(handle.db);
  } finally {
    await handle.destroy();
  }
}

async function recreate(database: BenchDatabase): Promise<void> {
  if (database.config.kind === 'sqlite') {
    const { file } = database.config;
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
    mkdirSync(path.dirname(file), { recursive: true });
    return;
  }
  const name = postgresName(database.scale);
  await withAdmin(database, async (client) => {
    await client.query(`drop database if exists ${name} with (force)`);
    await client.query(`create database ${name}`);
  });
}

/**
 * A database of `database.scale`, freshly seeded; or with `reuse`, the one a previous run seeded, brought up to
 * the latest migration. A database without the marker (an interrupted seed) is never reused.
 */
export async function prepareDatabase(database: BenchDatabase, reuse: boolean, progress: Progress): Promise<{ reused: boolean }> {
  if (reuse && (await isSeeded(database))) {
    await progress.phase('schema', 0, () => migrate(database.config));
    return { reused: true };
  }
  await recreate(database);
  await seedDatabase(database.config, SCALES[database.scale], progress);
  await markSeeded(database);
  return { reused: false };
}
