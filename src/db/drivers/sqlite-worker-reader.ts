import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  type QueryResult,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';
import { HttpError } from '../../errors.js';
import type { Database } from '../schema.js';
import { SqliteAdapterWithOwnQueue } from './sqlite-adapter.js';

/**
 * Reads that may take tens of milliseconds at a million articles (full-text search) waiting for the worker: past
 * this, a search is refused with 503 at once instead of queuing for seconds.
 */
const QUEUE_MAX = 32;
const STATEMENT_CACHE_SIZE = 100;

/**
 * The worker: a read-only connection of its own that runs one statement at a time, as better-sqlite3 does, but off
 * the main thread. Plain JavaScript evaluated as the worker's script, so it needs no file of its own next to the
 * compiled code and runs the same under the tests' TypeScript loader.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driverPath);
const database = new Database(workerData.file, { readonly: true });
database.pragma('busy_timeout = 5000');
const statements = new Map();
parentPort.on('message', ({ id, sql, parameters }) => {
  try {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = database.prepare(sql);
      if (statements.size >= ${STATEMENT_CACHE_SIZE}) statements.delete(statements.keys().next().value);
      statements.set(sql, statement);
    }
    parentPort.postMessage({ id, rows: statement.all(parameters) });
  } catch (error) {
    parentPort.postMessage({ id, error: { message: error.message, code: error.code } });
  }
});
`;

interface Pending {
  resolve(rows: unknown[]): void;
  reject(error: Error): void;
}

/** The worker, started at the first query: most processes (and every test app) never search. */
class WorkerReader {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  constructor(private readonly file: string) {}

  query(sql: string, parameters: readonly unknown[]): Promise<unknown[]> {
    if (this.pending.size >= QUEUE_MAX) return Promise.reject(new HttpError(503, { search: ['too many at once, retry later'] }));
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, sql, parameters });
    });
  }

  private start(): Worker {
    if (this.worker !== undefined) return this.worker;
    const driverPath = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file: this.file, driverPath } });
    worker.on('message', ({ id, rows, error }: { id: number; rows?: unknown[]; error?: { message: string; code?: string } }) => {
      const waiting = this.pending.get(id);
      this.pending.delete(id);
      if (error) waiting?.reject(Object.assign(new Error(error.message), { code: error.code }));
      else waiting?.resolve(rows ?? []);
    });
    // A worker that dies fails what it was running; the next query starts another.
    worker.on('error', (error) => this.failAll(error));
    worker.on('exit', () => {
      this.worker = undefined;
      this.failAll(new Error('the SQLite reader thread exited'));
    });
    this.worker = worker;
    return worker;
  }

  private failAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }

  async close(): Promise<void> {
    await this.worker?.terminate();
  }
}

class WorkerReadConnection implements DatabaseConnection {
  constructor(private readonly reader: WorkerReader) {}

  async executeQuery<R>({ sql, parameters }: CompiledQuery): Promise<QueryResult<R>> {
    return { rows: (await this.reader.query(sql, parameters)) as R[] };
  }

  // biome-ignore lint/correctness/useYield: it only refuses.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('the SQLite reader thread answers whole statements only');
  }
}

const onlyReads = () => new Error('the SQLite reader thread only reads: transactions go to the writer');

/**
 * A Kysely over a reader in a worker thread, for the reads that are slow at scale (full-text search): better-sqlite3
 * runs a statement on the calling thread, so a 30 ms search on the main thread would hold up every other request
 * for 30 ms. Searches queue at the worker, each request its own; everything else goes on at once.
 */
export function openWorkerReader(file: string): { db: Kysely<Database>; close(): Promise<void> } {
  const reader = new WorkerReader(file);
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => new WorkerReadConnection(reader),
    beginTransaction: async () => {
      throw onlyReads();
    },
    commitTransaction: async () => {
      throw onlyReads();
    },
    rollbackTransaction: async () => {
      throw onlyReads();
    },
    releaseConnection: async () => {},
    destroy: () => reader.close(),
  };
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new SqliteAdapterWithOwnQueue(),
      createDriver: () => driver,
      createQueryCompiler: () => new SqliteQueryCompiler(),
      createIntrospector: (kysely) => new SqliteIntrospector(kysely),
    },
  });
  return { db, close: () => db.destroy() };
}
