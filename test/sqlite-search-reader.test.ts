import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { HttpError } from '../src/errors.js';
import { scratchHandle } from './support/app.js';

/** About a third of a second of SQLite work on whatever thread runs it. */
const SLOW_READ = sql<{ n: number }>`with recursive n(i) as (select 1 union all select i + 1 from n where i < 3000000)
  select count(*) as n from n`;

describe('the SQLite search reader (a worker thread)', () => {
  const handle = scratchHandle('sqlite');

  it('reads what the writer committed', async () => {
    await sql`insert into tags (name) values ('seen-by-the-worker')`.execute(handle().writer);
    const { rows } = await sql<{ name: string }>`select name from tags where name = 'seen-by-the-worker'`.execute(handle().searcher);
    expect(rows).toEqual([{ name: 'seen-by-the-worker' }]);
  });

  it('keeps the main thread free while a slow read runs', async () => {
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const started = performance.now();
    const { rows } = await SLOW_READ.execute(handle().searcher);
    const took = performance.now() - started;
    delay.disable();
    expect(rows).toEqual([{ n: 3_000_000 }]);
    // The read took long enough to matter, and the event loop went on meanwhile.
    expect(took).toBeGreaterThan(100);
    expect(delay.max / 1e6).toBeLessThan(took / 2);
  });

  it('refuses reads past its queue with a 503 instead of queueing them for long', async () => {
    const reads = Array.from({ length: 40 }, () => sql`select 1 as one`.execute(handle().searcher));
    const outcomes = await Promise.allSettled(reads);
    const refused = outcomes.filter((outcome) => outcome.status === 'rejected');
    expect(refused.length).toBe(8);
    for (const outcome of refused) {
      const reason = (outcome as PromiseRejectedResult).reason;
      expect(reason).toBeInstanceOf(HttpError);
      expect(reason.statusCode).toBe(503);
    }
    // Once the queue drains, reads go through again.
    expect((await sql`select 1 as one`.execute(handle().searcher)).rows).toEqual([{ one: 1 }]);
  });

  it('passes errors on with their SQLite code, and refuses to write or open a transaction', async () => {
    await expect(sql`select * from no_such_table`.execute(handle().searcher)).rejects.toMatchObject({ code: 'SQLITE_ERROR' });
    await expect(sql`delete from tags returning id`.execute(handle().searcher)).rejects.toMatchObject({ code: 'SQLITE_READONLY' });
    await expect(
      handle()
        .searcher.transaction()
        .execute(async () => {}),
    ).rejects.toThrow(/only reads/);
  });
});
