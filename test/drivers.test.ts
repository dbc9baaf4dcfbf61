import BetterSqlite3 from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { Executor } from '../src/db/index.js';
import { withoutSqliteSamples } from '../src/db/migrations/0023_without_sqlite_samples.js';
import { ANALYZE_STATEMENTS } from '../src/db/statistics.js';
import { DATABASES, scratchHandle } from './support/app.js';
import { holdWriteTransaction } from './support/held-transaction.js';

/** `work`'s result, or a failure if it has not answered within a second: a read that waits for a writer never would. */
function atOnce<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('waited for the open write transaction')), 1000);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * The SQLite driver (src/db/drivers/sqlite.ts) reads on a read-only connection of its own beside the writer, in
 * WAL mode. If routing or a better-sqlite3 upgrade breaks that, reads wait behind write transactions again.
 */
describe('the SQLite driver', () => {
  const handle = scratchHandle('sqlite');

  beforeAll(async () => {
    await handle().db.insertInto('tags').values({ name: 'committed' }).execute();
  });

  it("answers a read during an open write transaction at once, with committed rows only, not the transaction's", async () => {
    const transaction = await holdWriteTransaction(handle(), 'uncommitted');
    try {
      const rows = await atOnce(handle().db.selectFrom('tags').select('name').orderBy('name').execute());
      expect(rows).toEqual([{ name: 'committed' }]);
    } finally {
      await transaction.commit();
    }
    // Committed, the rows are there for the very next read.
    expect(await handle().db.selectFrom('tags').select('name').orderBy('name').execute()).toEqual([
      { name: 'committed' },
      { name: 'uncommitted' },
    ]);
    await handle().db.deleteFrom('tags').where('name', '=', 'uncommitted').execute();
  });

  it('refuses a write on the reader', async () => {
    // A SELECT node goes to the reader whatever its text: here the text writes, as a misrouted write would.
    const select = handle().db.selectFrom('tags').select('name').compile();
    const write = { ...select, sql: "insert into tags (name) values ('sneaked') returning name", parameters: [] };
    await expect(handle().db.executeQuery(write)).rejects.toThrow(/readonly/);
    expect(await handle().db.selectFrom('tags').select('name').execute()).toEqual([{ name: 'committed' }]);
  });

  it('prepares repeated SQL once per connection', async () => {
    const prepare = vi.spyOn(BetterSqlite3.prototype, 'prepare');
    try {
      const read = (db: Executor) => db.selectFrom('tags').select('id').where('name', '=', 'prepared once').execute();
      for (let run = 0; run < 3; run++) {
        await read(handle().db);
        await handle().db.transaction().execute(read);
      }
      const readSql = handle().db.selectFrom('tags').select('id').where('name', '=', 'prepared once').compile().sql;
      const preparedOn = prepare.mock.calls.flatMap(([source], call) => (source === readSql ? [prepare.mock.contexts[call]] : []));
      // Once on the reader (outside the transaction) and once on the writer (inside it).
      expect(preparedOn).toHaveLength(2);
      expect(preparedOn[0]).not.toBe(preparedOn[1]);
    } finally {
      prepare.mockRestore();
    }
  });

  it('keeps no value samples when it gathers statistics, and drops those an older ANALYZE left', async () => {
    const statisticsTables = async () =>
      (
        await sql<{ name: string }>`select name from sqlite_master where name like 'sqlite_stat%' order by name`.execute(handle().db)
      ).rows.map(({ name }) => name);
    await sql`analyze`.execute(handle().db);
    expect(await statisticsTables()).toEqual(['sqlite_stat1', 'sqlite_stat4']);
    await withoutSqliteSamples('sqlite').up(handle().db as Kysely<unknown>);
    expect(await statisticsTables()).toEqual(['sqlite_stat1']);
    for (const statement of ANALYZE_STATEMENTS.sqlite) await sql.raw(statement).execute(handle().db);
    expect(await statisticsTables()).toEqual(['sqlite_stat1']);
  });

  it('runs on an SQLite release that keeps a statement planned from one run to the next', () => {
    // SQLite 3.54 expires a statement that joins or sorts and has a `column = ?` term whenever its bindings are
    // cleared, and better-sqlite3 clears them after every run: each list, article and feed statement was planned
    // again on every request (an article with its author: 27 µs instead of 6). better-sqlite3 is pinned to 13.0.3,
    // which ships 3.53.4. Before moving to a newer SQLite, time a join with a bound value against the same join with
    // the value written in the SQL (docs/PERFORMANCE.md, "SQLite re-planning every statement"); then raise this bound.
    const engine = new BetterSqlite3(':memory:');
    const { version } = engine.prepare<[], { version: string }>('select sqlite_version() as version').get()!;
    engine.close();
    const [major, minor] = version.split('.').map(Number) as [number, number];
    expect(major * 1000 + minor, `SQLite ${version}`).toBeLessThan(3054);
  });
});

for (const kind of DATABASES.filter((database) => database === 'postgres')) {
  /** pg returns BIGINT as a string unless told otherwise (src/db/drivers/postgres.ts); counts and timestamps are BIGINT. */
  describe(`the PostgreSQL driver [${kind}]`, () => {
    const handle = scratchHandle(kind, { migrate: false });

    it('returns BIGINT as a number', async () => {
      const { rows } = await sql<{ largest: unknown; counted: unknown }>`
        select ${Number.MAX_SAFE_INTEGER}::bigint as largest, count(*) as counted from generate_series(1, 3)`.execute(handle().db);
      expect(rows).toEqual([{ largest: Number.MAX_SAFE_INTEGER, counted: 3 }]);
    });
  });
}
