import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DatabaseConfig } from '../../config.js';
import type { Database } from '../schema.js';

/** Where the database reports trouble that no request is waiting to hear about; the app passes its logger. */
export interface DatabaseLog {
  warn(details: object, message: string): void;
}

const PG_INT8_OID = 20;

/** COUNT(*) and our epoch-millisecond columns are BIGINT; every value we store fits a JS number exactly. */
const getTypeParser = ((oid: number, format?: string) =>
  oid === PG_INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser;

export function openPostgres(config: Extract<DatabaseConfig, { kind: 'postgres' }>, log?: DatabaseLog) {
  const pool = new pg.Pool({
    connectionString: config.url,
    max: config.poolSize,
    connectionTimeoutMillis: config.connectTimeoutMs,
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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    async ping() {
      await pool.query('select 1');
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    destroy: () => db.destroy(),
  };
}
