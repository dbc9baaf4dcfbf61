import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';
import { DROP_SQLITE_SAMPLES } from '../statistics.js';

/**
 * Drops the value samples that an ANALYZE of an older `conduit seed` (or an operator's own) left in an SQLite file:
 * with them, each request's statement was planned again on every run (statistics.ts). The row counts stay.
 */
export function withoutSqliteSamples(dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>) {
      if (dialect !== 'sqlite') return;
      await sql.raw(DROP_SQLITE_SAMPLES).execute(db);
    },
    // The samples are only a cache of the data: ANALYZE gathers them again.
    async down() {},
  };
}
