import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/index.js';
import { createScratchDatabase, type ScratchDatabase, testConfig } from './support/app.js';

const QUEUED = 20;

/**
 * SQLite has one connection, so queries queue for it. The server's own first-come queue must be that queue: Kysely
 * 0.29 moved a lock of its own, which wakes every waiter at each release, in front of any driver whose adapter says
 * it has a single connection, and the upgrade silently put it back in front of ours. If a Kysely release does that
 * again, the queries below wait in Kysely's lock and the server's queue reports none waiting.
 */
describe('the SQLite connection queue', () => {
  let scratch: ScratchDatabase;
  let handle: DatabaseHandle;

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    handle = openDatabase(testConfig(scratch.url).database);
  });

  afterAll(async () => {
    await handle?.destroy();
    await scratch?.drop();
  });

  it("queues every query behind an open transaction in the server's own queue, and runs them in arrival order", async () => {
    let finishTransaction = () => {};
    const held = new Promise<void>((resolve) => {
      finishTransaction = resolve;
    });
    let transactionOpen = () => {};
    const opened = new Promise<void>((resolve) => {
      transactionOpen = resolve;
    });
    const transaction = handle.db.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      transactionOpen();
      await held;
    });
    await opened;
    expect(handle.poolStats()).toEqual({ total: 1, idle: 0, waiting: 0 });

    const finished: number[] = [];
    const queries = Array.from({ length: QUEUED }, (_, i) =>
      sql<{ n: number }>`select ${i} as n`.execute(handle.db).then(({ rows }) => finished.push(rows[0]!.n)),
    );
    // Let every query go as far as it can before the connection is free again.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(handle.poolStats()).toEqual({ total: 1, idle: 0, waiting: QUEUED });

    finishTransaction();
    await transaction;
    await Promise.all(queries);
    expect(finished).toEqual(Array.from({ length: QUEUED }, (_, i) => i));
    expect(handle.poolStats()).toEqual({ total: 1, idle: 1, waiting: 0 });
  });
});
