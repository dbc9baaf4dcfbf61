import { describe, expect, it } from 'vitest';
import { scratchHandle } from './support/app.js';
import { holdWriteTransaction } from './support/held-transaction.js';

const QUEUED = 20;

/**
 * SQLite has one writer connection, so writes queue for it (reads go to a reader beside it and never queue). The
 * server's own first-come queue must be that queue: Kysely 0.29 moved a lock of its own, which wakes every waiter at
 * each release, in front of any driver whose adapter says it has a single connection, and the upgrade silently put
 * it back in front of ours. If a Kysely release does that again, the writes below wait in Kysely's lock and the
 * server's queue reports none waiting.
 */
describe('the SQLite connection queue', () => {
  const database = scratchHandle('sqlite');

  it("queues every write behind an open transaction in the server's own queue, and runs them in arrival order", async () => {
    const handle = database();
    const transaction = await holdWriteTransaction(handle, 'held');
    expect(handle.poolStats()).toEqual({ total: 1, idle: 0, waiting: 0 });

    const finished: number[] = [];
    const queries = Array.from({ length: QUEUED }, (_, i) =>
      handle.db
        .insertInto('tags')
        .values({ name: `tag ${i}` })
        .returning('name')
        .execute()
        .then(([row]) => {
          finished.push(Number(row!.name.slice('tag '.length)));
        }),
    );
    // Let every query go as far as it can before the connection is free again.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(handle.poolStats()).toEqual({ total: 1, idle: 0, waiting: QUEUED });

    await transaction.commit();
    await Promise.all(queries);
    expect(finished).toEqual(Array.from({ length: QUEUED }, (_, i) => i));
    expect(handle.poolStats()).toEqual({ total: 1, idle: 1, waiting: 0 });
  });
});
