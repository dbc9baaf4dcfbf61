import type { Dialect } from './index.js';

/** Removes the value samples that ANALYZE keeps on an SQLite built with STAT4 (why: ANALYZE_STATEMENTS). */
export const DROP_SQLITE_SAMPLES = 'drop table if exists sqlite_stat4';

/**
 * What gathers the planner's statistics. better-sqlite3's SQLite is built with STAT4, so ANALYZE also keeps samples
 * of indexed values, and SQLite plans a statement again each time a value is bound to a `column = ?` that meets an
 * index with samples: every request's statement is then parsed and planned anew (an article with its author took
 * 32 µs instead of 8). The row counts that ANALYZE keeps in sqlite_stat1 are all our plans need, so the samples go.
 */
export const ANALYZE_STATEMENTS = {
  sqlite: ['analyze', DROP_SQLITE_SAMPLES],
  postgres: ['analyze'],
} as const satisfies Record<Dialect, readonly string[]>;
