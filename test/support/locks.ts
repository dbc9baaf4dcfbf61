import pg from 'pg';
import { directUrl, withAdmin } from './app.js';

/**
 * Resolves once `atLeast` backends of the database at `url` wait for a lock: any backend, or only those running a
 * statement that matches `pattern` (SQL `like`), or the backend `pid`. Where a test's requests have got to, told by
 * PostgreSQL rather than guessed with a sleep.
 */
export async function lockWaiter(
  url: string,
  which: { pattern: string } | { pid: number } | 'any' = 'any',
  { atLeast = 1, deadlineMs = 10_000 } = {},
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  const [condition, values] =
    which === 'any' ? ['true', []] : 'pid' in which ? ['pid = $1', [which.pid]] : ['query like $1', [which.pattern]];
  for (;;) {
    const waiting = await withAdmin(async (client) => {
      const { rows } = await client.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid() and ${condition}`,
        values,
      );
      return rows[0]!.n;
    }, url);
    if (waiting >= atLeast) return;
    if (Date.now() > deadline) {
      throw new Error(`fewer than ${atLeast} waited for a lock (${JSON.stringify(which)}) within ${deadlineMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface TableLock {
  /** The backend that holds, or waits for, the lock. */
  pid: number;
  /** Settles when PostgreSQL grants the lock, which waits for whoever reads the table at the time. */
  granted: Promise<unknown>;
  release(): Promise<void>;
}

/**
 * Another connection to `url` asking for `table` against every statement that reads it (ACCESS EXCLUSIVE, as a
 * stuck migration or a careless `lock table` would take it), held until `release`. Straight to PostgreSQL, as a
 * migration would be, so that `pid` is the backend that holds it.
 */
export async function lockTable(url: string, table: string): Promise<TableLock> {
  const holder = new pg.Client({ connectionString: directUrl(url) });
  await holder.connect();
  const { rows } = await holder.query<{ pid: number }>('select pg_backend_pid() as pid');
  await holder.query('begin');
  const granted = holder.query(`lock table ${table} in access exclusive mode`);
  // Awaited by whoever needs it; a test that fails before then must not also report a stray rejection.
  granted.catch(() => {});
  return {
    pid: rows[0]!.pid,
    granted,
    async release() {
      try {
        await granted;
        await holder.query('commit');
      } finally {
        await holder.end();
      }
    },
  };
}
