import { PostgresAdapter } from 'kysely';
import type { DatabaseConfig } from '../config.js';
import { type DatabaseLog, openPostgres } from './drivers/postgres.js';
import { openSqlite } from './drivers/sqlite.js';
import type { ReplicaSet } from './replicas.js';
import type { Executor } from './schema.js';

export type { DatabaseLog } from './drivers/postgres.js';
export type { Executor } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

/** Which database an executor talks to, for the rare statement the two dialects cannot share. */
export const dialectOf = (db: Executor): Dialect => (db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite');

/** Connection pool occupancy, in pg.Pool's terms: open clients, the idle ones, and queries queued for one. */
export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export interface DatabaseHandle {
  db: Executor;
  /**
   * For requests that write: on PostgreSQL a pool of its own, so that writes never queue behind reads for a
   * connection; on SQLite the same as `db`, whose driver already runs reads beside the writer.
   */
  writer: Executor;
  /**
   * For reads that can take tens of milliseconds (full-text search): on SQLite a connection in a worker thread, so
   * they do not hold up the main thread's other requests; on PostgreSQL the same as `db`.
   */
  searcher: Executor;
  /**
   * Searches that may run at once (the others wait their turn, articles/search-turns.ts): on SQLite four, so that the
   * worker thread has a statement to run while the others' answers are put together on the main thread; on
   * PostgreSQL the read pool's connections.
   */
  searchesAtOnce: number;
  dialect: Dialect;
  /** PostgreSQL's streaming replicas that take reads (replicas.ts); null without any, and on SQLite. */
  replicas: ReplicaSet | null;
  /** Answers whether the database can run a query right now. */
  ping(): Promise<void>;
  /** On SQLite: its writer connection, and the statements queued for their turn at it (reads never queue). */
  poolStats(): PoolStats;
  destroy(): Promise<void>;
}

export function openDatabase(config: DatabaseConfig, log?: DatabaseLog): DatabaseHandle {
  return config.kind === 'sqlite' ? { dialect: 'sqlite', ...openSqlite(config) } : { dialect: 'postgres', ...openPostgres(config, log) };
}
