import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/index.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { scratchHandle, TEST_SECRET } from './support/app.js';
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

describe('a new SQLite database', () => {
  it("is the owner's alone: its folder, the file and the WAL files SQLite adds beside it", async () => {
    const parent = mkdtempSync(path.join(tmpdir(), 'conduit-modes-'));
    const file = path.join(parent, 'data', 'conduit.db');
    const handle = openDatabase(loadConfig({ NODE_ENV: 'test', JWT_SECRET: TEST_SECRET, DATABASE_URL: `sqlite:${file}` }).database);
    try {
      await migrateToLatest(handle);
      const modeOf = (where: string) => statSync(where).mode & 0o777;
      expect(modeOf(path.dirname(file))).toBe(0o700);
      for (const part of [file, `${file}-wal`, `${file}-shm`]) expect([part, modeOf(part)]).toEqual([part, 0o600]);
    } finally {
      await handle.destroy();
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
