import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLockSampler, summarize } from '../scripts/bench/locks.js';
import { createScratchDatabase, type ScratchDatabase } from './support/app.js';

describe("the bench's lock-wait summary", () => {
  it('averages the share of active backends waiting on a lock over the samples that saw any', () => {
    const summary = summarize([
      { active: { 'Lock:transactionid': 3, running: 1 }, idleInTransaction: 2 },
      { active: {}, idleInTransaction: 0 },
      { active: { 'IO:WALSync': 2 }, idleInTransaction: 1 },
    ]);
    expect(summary).toEqual({
      samples: 3,
      idleSamples: 1,
      activeMean: 3,
      idleInTransactionMean: 1,
      lockFraction: (0.75 + 0) / 2,
      waits: { 'Lock:transactionid': 3, running: 1, 'IO:WALSync': 2 },
    });
  });

  it('has no lock share when no backend was active', () => {
    expect(summarize([{ active: {}, idleInTransaction: 0 }]).lockFraction).toBeNull();
    expect(summarize([]).lockFraction).toBeNull();
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)("the bench's lock sampler on PostgreSQL", () => {
  let scratch: ScratchDatabase | undefined;
  const clients: pg.Client[] = [];
  const connect = async () => {
    const client = new pg.Client({ connectionString: scratch!.url });
    await client.connect();
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
  });

  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => {});
    await scratch?.drop();
  });

  it('sees a backend that waits for a row another transaction holds, and the holder idle in its transaction', async () => {
    const holder = await connect();
    const waiter = await connect();
    await holder.query('create table hot (id int primary key, n int not null)');
    await holder.query('insert into hot values (1, 0)');
    await holder.query('begin');
    await holder.query('update hot set n = n + 1 where id = 1');
    const blocked = waiter.query('update hot set n = n + 1 where id = 1');

    const sampler = await openLockSampler(scratch!.url);
    try {
      const sampling = sampler.start();
      await sleep(350);
      const waits = await sampling.stop();
      expect(waits.samples).toBeGreaterThanOrEqual(2);
      // The waiter is the one active backend: the sampler leaves itself out.
      expect(waits.activeMean).toBe(1);
      expect(waits.lockFraction).toBe(1);
      expect(waits.idleInTransactionMean).toBe(1);
      expect(Object.keys(waits.waits)).toEqual(['Lock:transactionid']);
    } finally {
      await holder.query('commit');
      await blocked;
      await sampler.close();
    }
  });
});
