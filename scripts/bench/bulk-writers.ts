import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { DatabaseConfig } from '../../src/config.js';
import { ANALYZE_STATEMENTS } from '../../src/db/statistics.js';
import type { TableLoad } from './seed-data.js';

/** Writes generated rows straight into a migrated database, far faster than the API or Kysely could. */
export interface BulkWriter {
  insert(load: TableLoad, batch: unknown[][]): Promise<void>;
  /** Waits until every row handed to insert() is stored. */
  flush(): Promise<void>;
  execute(statement: string): Promise<void>;
  /** The rows came with explicit ids: the next id the database hands out must follow the largest. */
  followExplicitIds(tables: readonly string[]): Promise<void>;
  /** Fresh statistics (and more, where the database needs it) so that the server plans its queries on real numbers. */
  analyze(): Promise<void>;
  close(): Promise<void>;
}

/** Big enough that commits cost nothing next to the rows, small enough that the WAL file stays moderate. */
const SQLITE_ROWS_PER_TRANSACTION = 250_000;
const SQLITE_LOAD_CACHE_KIB = 1_048_576;

function sqliteWriter(file: string): BulkWriter {
  const db = new BetterSqlite3(file);
  // Only for this connection, only while loading: a crash mid-seed loses the file, and the bench reseeds it
  // anyway because the completion marker is written last.
  db.pragma('synchronous = OFF');
  db.pragma(`cache_size = -${SQLITE_LOAD_CACHE_KIB}`);
  db.pragma('temp_store = MEMORY');
  // Foreign keys stay unchecked on this connection (SQLite's default): the rows are consistent by construction,
  // which the bench-seed test verifies with foreign_key_check.
  const statements = new Map<string, BetterSqlite3.Statement>();
  let rowsInTransaction = 0;
  const commit = () => {
    if (db.inTransaction) db.exec('commit');
    rowsInTransaction = 0;
  };

  return {
    async insert(load, batch) {
      let statement = statements.get(load.table);
      if (statement === undefined) {
        const names = load.columns.map(([name]) => name);
        statement = db.prepare(`insert into ${load.table} (${names.join(', ')}) values (${names.map(() => '?').join(', ')})`);
        statements.set(load.table, statement);
      }
      if (!db.inTransaction) db.exec('begin');
      const rows = batch[0]!.length;
      const values = new Array<unknown>(batch.length);
      for (let row = 0; row < rows; row++) {
        for (let column = 0; column < batch.length; column++) values[column] = batch[column]![row];
        statement.run(values);
      }
      rowsInTransaction += rows;
      if (rowsInTransaction >= SQLITE_ROWS_PER_TRANSACTION) commit();
    },
    async flush() {
      commit();
    },
    async execute(statement) {
      db.exec(statement);
    },
    async followExplicitIds() {
      // Nothing to do: an AUTOINCREMENT table's sqlite_sequence row always holds the largest id ever inserted,
      // explicit ones included (the bench-seed test checks it).
    },
    async analyze() {
      for (const statement of ANALYZE_STATEMENTS.sqlite) db.exec(statement);
      db.pragma('synchronous = NORMAL');
      // The server should start on a compact database file, not replay gigabytes of WAL on its first reads.
      db.pragma('wal_checkpoint(TRUNCATE)');
    },
    async close() {
      db.close();
    },
  };
}

async function postgresWriter(url: string): Promise<BulkWriter> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  // Each batch commits on its own; waiting for the WAL flush of every one would dominate the load.
  await client.query('set synchronous_commit = off');
  // The next batch is generated while the previous one is being written: insert() sends one and waits for the one before.
  let inFlight: Promise<unknown> = Promise.resolve();

  return {
    async insert(load, batch) {
      const names = load.columns.map(([name]) => name).join(', ');
      const arrays = load.columns.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ');
      const previous = inFlight;
      inFlight = client.query(`insert into ${load.table} (${names}) select * from unnest(${arrays})`, batch);
      // Its failure is reported by the next insert() or flush(); this only keeps it from counting as unhandled.
      inFlight.catch(() => {});
      await previous;
    },
    async flush() {
      await inFlight;
    },
    async execute(statement) {
      await client.query(statement);
    },
    async followExplicitIds(tables) {
      for (const table of tables) {
        await client.query(`select setval(pg_get_serial_sequence('${table}', 'id'), (select max(id) from ${table}))`);
      }
    },
    async analyze() {
      // VACUUM as well: it sets the visibility map that index-only scans need. Without it autovacuum would do
      // that work on the big tables in the middle of a measurement.
      await client.query('vacuum (analyze)');
      // The load leaves gigabytes of dirty pages; the checkpointer would write them out during the first
      // scenarios, which then measured the disk more than the server.
      try {
        await client.query('checkpoint');
      } catch (error) {
        console.warn(`CHECKPOINT refused (${(error as Error).message}): the first scenarios may run while PostgreSQL writes the load out`);
      }
    },
    async close() {
      await client.end();
    },
  };
}

export function openBulkWriter(database: DatabaseConfig): Promise<BulkWriter> {
  return database.kind === 'sqlite' ? Promise.resolve(sqliteWriter(database.file)) : postgresWriter(database.url);
}
