import { mkdirSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  type DialectAdapter,
  type Driver,
  Kysely,
  PostgresAdapter,
  PostgresDialect,
  SqliteAdapter,
  SqliteDialect,
} from 'kysely';
import pg from 'pg';
import { setWithin } from '../bounded-map.js';
import type { DatabaseConfig } from '../config.js';
import { FifoSlots } from '../fifo-slots.js';
import { unwritable } from '../setting-error.js';
import { runPrecompiledDirectly } from './precompiled.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

/** A database handle or a transaction: every query function takes one as its first argument. */
export type Executor = Kysely<Database>;

/** Which database an executor talks to, for the rare statement the two dialects cannot share. */
export const dialectOf = (db: Executor): Dialect => (db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite');

/** Connection pool occupancy, in pg.Pool's terms: open clients, the idle ones, and queries queued for one. */
export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** Where the database reports trouble that no request is waiting to hear about; the app passes its logger. */
export interface DatabaseLog {
  warn(details: object, message: string): void;
}

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Answers whether the database can run a query right now. */
  ping(): Promise<void>;
  /** On SQLite: its one connection, and the queries queued for their turn at it. */
  poolStats(): PoolStats;
  destroy(): Promise<void>;
}

const PG_INT8_OID = 20;
const SQLITE_STATEMENT_CACHE_SIZE = 200;

/**
 * better-sqlite3 compiles a statement on every prepare(); Kysely prepares each query it runs.
 * Reusing compiled statements for repeated SQL text removes that cost from every request.
 */
function withStatementCache(database: BetterSqlite3.Database): BetterSqlite3.Database {
  const cache = new Map<string, BetterSqlite3.Statement>();
  const prepare = database.prepare.bind(database);
  return new Proxy(database, {
    get(target, property, receiver) {
      if (property !== 'prepare') return Reflect.get(target, property, receiver);
      return (source: string) => {
        let statement = cache.get(source);
        if (statement === undefined) {
          statement = prepare(source);
          setWithin(cache, SQLITE_STATEMENT_CACHE_SIZE, source, statement);
        }
        return statement;
      };
    },
  });
}

/**
 * Kysely puts a lock of its own in front of a driver whose adapter says it has one connection, and that lock wakes
 * every waiter at each release (all but one go back to waiting: under a burst of 50 queued writes, a sixth of all
 * memory allocated). The driver below queues turns at the one connection itself, so Kysely is told not to.
 */
class SqliteAdapterWithOwnQueue extends SqliteAdapter {
  override get supportsMultipleConnections(): boolean {
    return true;
  }
}

/**
 * SQLite's plain BEGIN takes the write lock only at the first write, so two processes that both read first
 * can deadlock and one fails with SQLITE_BUSY at once. BEGIN IMMEDIATE queues on the busy timeout instead.
 */
class SqliteDialectForServer extends SqliteDialect {
  readonly turns = new FifoSlots(1);

  override createAdapter(): DialectAdapter {
    return new SqliteAdapterWithOwnQueue();
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    driver.beginTransaction = async (connection) => {
      await connection.executeQuery(CompiledQuery.raw('begin immediate'));
    };
    // One query or transaction at a time on the one connection, first come first served, one wake-up per release.
    const turns = this.turns;
    const acquire = driver.acquireConnection.bind(driver);
    const release = driver.releaseConnection.bind(driver);
    driver.acquireConnection = async () => {
      await turns.take();
      try {
        return await acquire();
      } catch (error) {
        turns.release();
        throw error;
      }
    };
    driver.releaseConnection = async (connection) => {
      try {
        await release(connection);
      } finally {
        turns.release();
      }
    };
    return driver;
  }
}

/** The file, created with its folder when new, in WAL mode: both need the folder to be writable. */
function openSqliteFile(file: string): BetterSqlite3.Database {
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    const database = new BetterSqlite3(file);
    database.pragma('journal_mode = WAL');
    return database;
  } catch (error) {
    // DATABASE_URL names the file when set; unset, the file is in DATA_DIR, so the fix names both.
    throw unwritable(
      error,
      'DATABASE_URL',
      `the SQLite database ${file}`,
      'point DATABASE_URL, or DATA_DIR when it is unset, at a writable folder',
    );
  }
}

function openSqlite(file: string): DatabaseHandle {
  const database = openSqliteFile(file);
  // NORMAL in WAL mode never corrupts and survives a process crash; only an OS crash can lose the last commits.
  database.pragma('synchronous = NORMAL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  const cachedStatements = withStatementCache(database);
  const dialect = new SqliteDialectForServer({ database: cachedStatements });
  const db = new Kysely<Database>({ dialect });
  // SQLite has one connection. While a transaction is open on it, a direct read would see that transaction's
  // uncommitted rows, so the read waits for Kysely's connection lock instead, as every other query does.
  runPrecompiledDirectly(db, (query) => (database.inTransaction ? undefined : cachedStatements.prepare(query.sql).all(query.parameters)));
  return {
    db,
    dialect: 'sqlite',
    async ping() {
      database.prepare('select 1').get();
    },
    poolStats: () => ({ total: 1, idle: dialect.turns.holders === 0 ? 1 : 0, waiting: dialect.turns.queued }),
    destroy: () => db.destroy(),
  };
}

function openPostgres(config: Extract<DatabaseConfig, { kind: 'postgres' }>, log?: DatabaseLog): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: config.url,
    max: config.poolSize,
    connectionTimeoutMillis: config.connectTimeoutMs,
    // COUNT(*) and our epoch-millisecond columns are BIGINT; every value we store fits a JS number exactly.
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === PG_INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // A client that loses its connection emits 'error', and with no listener that crashes the process: pg-pool
  // listens only while the client is idle, not while a request holds it (mid-transaction, or between queries).
  // The request itself still fails (503) and the pool drops the client; later requests connect afresh.
  pool.on('connect', (client) => {
    client.on('error', (error) => log?.warn({ err: error }, 'lost a database connection'));
  });
  // Idle clients also reach the pool's own handler, which must exist; the client's listener has logged them already.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  // Named, a statement is parsed and planned once per connection rather than on every run. Only the few
  // precompiled lookups run this way, so the names stay few, and their plans fit any parameter (primary keys).
  const statementNames = new Map<string, string>();
  const statementName = (sql: string) => {
    let name = statementNames.get(sql);
    if (name === undefined) {
      name = `precompiled_${statementNames.size + 1}`;
      statementNames.set(sql, name);
    }
    return name;
  };
  runPrecompiledDirectly(db, (query) =>
    pool.query({ name: statementName(query.sql), text: query.sql, values: [...query.parameters] }).then((result) => result.rows),
  );
  return {
    db,
    dialect: 'postgres',
    async ping() {
      await pool.query('select 1');
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    destroy: () => db.destroy(),
  };
}

export function openDatabase(config: DatabaseConfig, log?: DatabaseLog): DatabaseHandle {
  return config.kind === 'sqlite' ? openSqlite(config.file) : openPostgres(config, log);
}
