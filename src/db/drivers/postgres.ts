import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DatabaseConfig } from '../../config.js';
import { ReplicaSet } from '../replicas.js';
import type { Database } from '../schema.js';
import { statementName } from '../statement-names.js';

/** Where the database reports trouble that no request is waiting to hear about; the app passes its logger. */
export interface DatabaseLog {
  warn(details: object, message: string): void;
}

const PG_INT8_OID = 20;

/** COUNT(*) and our epoch-millisecond columns are BIGINT; every value we store fits a JS number exactly. */
const getTypeParser = ((oid: number, format?: string) =>
  oid === PG_INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser;

type PostgresConfig = Extract<DatabaseConfig, { kind: 'postgres' }>;

/**
 * Named statements a connection keeps at most: each holds memory in its PostgreSQL backend for as long as the
 * connection lives. Past it, a text goes unnamed on that connection.
 */
const STATEMENTS_PER_CONNECTION = 64;

/** Sends the texts that have a name (statement-names.ts) as named statements, parsed once per connection. */
class NamingClient extends pg.Client {
  private readonly named = new Set<string>();

  // biome-ignore lint/suspicious/noExplicitAny: one override for all of pg's overloads, which it passes on untouched
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === 'string' && Array.isArray(values) && callback === undefined) {
      const name = statementName(config);
      if (name !== undefined && (this.named.has(name) || this.named.size < STATEMENTS_PER_CONNECTION)) {
        this.named.add(name);
        return super.query({ name, text: config, values });
      }
    }
    return super.query(config, values, callback);
  }
}

/**
 * The connections kept for requests that write: a quarter of the pool, at least one. Writes are short and few beside
 * reads; what they must not do is wait behind every read queued for a connection (under a read load that filled the
 * pool, a favorite waited its turn three times, p50 160 ms, for a few milliseconds of work).
 */
const REPLICA_CONNECT_TIMEOUT_MS = 1000;

const writeConnections = (poolSize: number): number => Math.max(1, Math.round(poolSize / 4));

function openPool(config: PostgresConfig, max: number, log?: DatabaseLog) {
  const pool = new pg.Pool({
    connectionString: config.url,
    max,
    // DATABASE_PREPARED_STATEMENTS=off: every text unnamed, for a pooler that would hand a name to a session without it.
    Client: config.preparedStatements ? NamingClient : pg.Client,
    connectionTimeoutMillis: config.connectTimeoutMs,
    // Sent when the connection opens, so it is the session's default: a statement never starts without it, and
    // `reset statement_timeout` comes back to it after a migration lifts it (migrate.ts). 0 sends nothing.
    statement_timeout: config.statementTimeoutMs,
    types: { getTypeParser },
  });
  // A client that loses its connection emits 'error', and with no listener that crashes the process: pg-pool
  // listens only while the client is idle, not while a request holds it (mid-transaction, or between queries).
  // The request itself still fails (503) and the pool drops the client; later requests connect afresh.
  pool.on('connect', (client) => {
    client.on('error', (error) => log?.warn({ err: error }, 'lost a database connection'));
  });
  // Idle clients also reach the pool's own handler, which must exist; the client's listener has logged them already.
  pool.on('error', () => {});
  return pool;
}

/**
 * Two pools on one database, DATABASE_POOL_SIZE connections in all (two at least): one for requests that only
 * read, one for requests that write. Either runs any statement, so a query sent to the other one waits in the
 * other queue, never goes wrong; a write committed on one is seen by the next read on the other.
 */
export function openPostgres(config: PostgresConfig, log?: DatabaseLog) {
  const writes = writeConnections(config.poolSize);
  const reads = Math.max(1, config.poolSize - writes);
  const readPool = openPool(config, reads, log);
  const writePool = openPool(config, writes, log);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: readPool }) });
  const writer = new Kysely<Database>({ dialect: new PostgresDialect({ pool: writePool }) });
  const replicaUrls = config.replicas?.urls ?? [];
  const replicas =
    replicaUrls.length === 0
      ? null
      : new ReplicaSet(
          readPool,
          () => new PostgresDialect({ pool: readPool }).createDriver(),
          // A replica that does not answer is passed over for the primary: waiting the primary's full connect
          // timeout for it would hold up the reads it was meant to speed up.
          replicaUrls.map((url) => ({
            url,
            pool: openPool({ ...config, url, connectTimeoutMs: Math.min(config.connectTimeoutMs, REPLICA_CONNECT_TIMEOUT_MS) }, reads, log),
          })),
          config.replicas!.maxLagMs,
          log,
        );
  const sum = (count: (pool: pg.Pool) => number) => count(readPool) + count(writePool);
  return {
    db,
    writer,
    // PostgreSQL runs each query in its own server process: a slow read holds a connection, never this process.
    searcher: db,
    searchesAtOnce: reads,
    async ping() {
      await readPool.query('select 1');
    },
    poolStats: () => ({
      total: sum((pool) => pool.totalCount),
      idle: sum((pool) => pool.idleCount),
      waiting: sum((pool) => pool.waitingCount),
    }),
    replicas,
    destroy: async () => {
      await replicas?.close();
      await Promise.all([db.destroy(), writer.destroy()]);
    },
  };
}
