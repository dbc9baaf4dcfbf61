import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  Kysely,
  type QueryResult,
  SelectQueryNode,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';
import { setWithin } from '../../bounded-map.js';
import type { DatabaseConfig } from '../../config.js';
import { FifoSlots } from '../../fifo-slots.js';
import { unwritable } from '../../setting-error.js';
import type { Database } from '../schema.js';
import { SqliteAdapterWithOwnQueue } from './sqlite-adapter.js';
import { openWorkerReader } from './sqlite-worker-reader.js';

const STATEMENT_CACHE_SIZE = 200;

/**
 * better-sqlite3 compiles a statement on every prepare(); reusing the compiled statement for repeated SQL text
 * takes that cost off every request. A statement belongs to its connection, so each connection has its own.
 */
function statementCache(database: BetterSqlite3.Database): (sql: string) => BetterSqlite3.Statement {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return (sql) => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = database.prepare(sql);
      setWithin(statements, STATEMENT_CACHE_SIZE, sql, statement);
    }
    return statement;
  };
}

/**
 * Kysely's node kind, not the SQL text, says a query only reads: raw SQL and every statement Kysely did not build
 * as a SELECT go to the writer. The reader is opened read-only, so a misrouted write fails instead of writing.
 */
const onlyReads = (query: CompiledQuery): boolean => SelectQueryNode.is(query.query);

/**
 * Two connections to one WAL-mode file. The writer runs every transaction and every statement that may write, one
 * at a time, first come first served, one wake-up per release. The reader runs the SELECTs outside transactions
 * at once: better-sqlite3 runs a statement synchronously, so a read is whole before anything else runs, and WAL
 * shows it the last commit, never the rows of a write transaction still open on the writer across awaits.
 */
class SqliteServerDriver implements Driver {
  readonly turns = new FifoSlots(1);
  private readonly prepareWrite: (sql: string) => BetterSqlite3.Statement;
  private readonly prepareRead: (sql: string) => BetterSqlite3.Statement;

  constructor(
    private readonly writer: BetterSqlite3.Database,
    private readonly reader: BetterSqlite3.Database,
  ) {
    this.prepareWrite = statementCache(writer);
    this.prepareRead = statementCache(reader);
  }

  /** Both connections are opened by `openSqlite`, so that an unwritable file fails there, before Kysely exists. */
  async init(): Promise<void> {}

  /** Each acquisition is its own connection object: whether it holds a transaction decides where its queries go. */
  async acquireConnection(): Promise<SqliteServerConnection> {
    return new SqliteServerConnection(this);
  }

  /**
   * The turn is held from BEGIN to the release of the connection. BEGIN IMMEDIATE takes SQLite's write lock at
   * once: with a plain BEGIN, two processes that both read first can deadlock, and one fails with SQLITE_BUSY at
   * once instead of queuing on the busy timeout.
   */
  async beginTransaction(connection: SqliteServerConnection): Promise<void> {
    await this.turns.take();
    connection.holdsWriter = true;
    this.writer.exec('begin immediate');
  }

  async commitTransaction(): Promise<void> {
    this.writer.exec('commit');
  }

  async rollbackTransaction(): Promise<void> {
    this.writer.exec('rollback');
  }

  /** Kysely releases the connection whether BEGIN, the work or COMMIT failed, so the turn always comes back. */
  async releaseConnection(connection: SqliteServerConnection): Promise<void> {
    if (!connection.holdsWriter) return;
    connection.holdsWriter = false;
    this.turns.release();
  }

  async destroy(): Promise<void> {
    this.reader.close();
    this.writer.close();
  }

  /** A SELECT's rows from the reader, or `undefined` for a query that must go to the writer. */
  read(query: CompiledQuery): unknown[] | undefined {
    return onlyReads(query) ? this.prepareRead(query.sql).all(query.parameters) : undefined;
  }

  /** On the writer, which the caller holds: in a transaction, or for this one statement. */
  write<R>({ sql, parameters }: CompiledQuery): QueryResult<R> {
    const statement = this.prepareWrite(sql);
    // A statement that returns rows (a SELECT in a transaction, RETURNING) must be read, not run.
    if (statement.reader) return { rows: statement.all(parameters) as R[] };
    const { changes, lastInsertRowid } = statement.run(parameters);
    return { insertId: BigInt(lastInsertRowid), numAffectedRows: BigInt(changes), rows: [] };
  }

  async writeInTurn<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    await this.turns.take();
    try {
      return this.write(query);
    } finally {
      this.turns.release();
    }
  }
}

class SqliteServerConnection implements DatabaseConnection {
  /** Set while this connection runs a transaction, and so holds the writer's turn. */
  holdsWriter = false;

  constructor(private readonly driver: SqliteServerDriver) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.holdsWriter) return this.driver.write(query);
    const rows = this.driver.read(query);
    return rows === undefined ? this.driver.writeInTurn(query) : { rows: rows as R[] };
  }

  // biome-ignore lint/correctness/useYield: it only refuses.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    // A half-read statement would keep the shared reader busy across awaits, and every other read would fail.
    throw new Error('streaming is not supported on SQLite here: every read runs to completion at once');
  }
}

/**
 * The file, created with its folder when new, in WAL mode: both need the folder to be writable. A new file and
 * folder are the owner's alone (SQLite would make the file readable by everyone): the file holds password hashes
 * and sessions, and SQLite gives its -wal and -shm files the database file's permissions. Existing ones keep theirs.
 */
function openWriter(file: string): BetterSqlite3.Database {
  try {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    closeSync(openSync(file, 'a', 0o600));
    const database = new BetterSqlite3(file);
    // Readers and the writer work side by side only in WAL mode; it is kept in the file.
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

export function openSqlite({ file, synchronous }: Extract<DatabaseConfig, { kind: 'sqlite' }>) {
  const writer = openWriter(file);
  // FULL syncs the WAL at every commit, so an acknowledged write survives power loss; NORMAL syncs only at
  // checkpoints: never corrupt, and safe from a process crash, but an OS crash can lose the last commits.
  writer.pragma(`synchronous = ${synchronous}`);
  writer.pragma('busy_timeout = 5000');
  writer.pragma('foreign_keys = ON');
  const reader = new BetterSqlite3(file, { readonly: true });
  // A reader waits only while another process recovers or resets the WAL.
  reader.pragma('busy_timeout = 5000');
  const driver = new SqliteServerDriver(writer, reader);
  const dialect: Dialect = {
    createAdapter: () => new SqliteAdapterWithOwnQueue(),
    createDriver: () => driver,
    createQueryCompiler: () => new SqliteQueryCompiler(),
    createIntrospector: (db) => new SqliteIntrospector(db),
  };
  const db = new Kysely<Database>({ dialect });
  const searcher = openWorkerReader(file);
  return {
    db,
    writer: db,
    searcher: searcher.db,
    searchesAtOnce: 4,
    replicas: null,
    async ping() {
      reader.prepare('select 1').get();
    },
    /** The writer and the statements queued for it; the reader never has a queue. */
    poolStats: () => ({ total: 1, idle: driver.turns.holders === 0 ? 1 : 0, waiting: driver.turns.queued }),
    destroy: async () => {
      await Promise.all([db.destroy(), searcher.close()]);
    },
  };
}
