import type { Executor } from './schema.js';

/**
 * Something kept per database (caches, compiled queries), made on first use: one process may hold several
 * databases (tests run many apps side by side), and a transaction is a database of its own here.
 */
export function perDatabase<T>(create: (db: Executor) => T): (db: Executor) => T {
  const byDatabase = new WeakMap<Executor, T>();
  return (db) => {
    let kept = byDatabase.get(db);
    if (kept === undefined) {
      kept = create(db);
      byDatabase.set(db, kept);
    }
    return kept;
  };
}
