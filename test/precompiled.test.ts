import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/index.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { precompiled } from '../src/db/precompiled.js';
import { createScratchDatabase, DATABASES, type ScratchDatabase, testConfig } from './support/app.js';

for (const kind of DATABASES) {
  describe(`precompiled queries [${kind}]`, () => {
    let scratch: ScratchDatabase;
    let handle: DatabaseHandle;
    let builds = 0;
    const counterValue = precompiled((db) => {
      builds++;
      return db.selectFrom('counters').select(['name', 'value']).where('name', '=', 'placeholder');
    });

    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
      handle = openDatabase(testConfig(scratch.url).database);
      await migrateToLatest(handle);
    });

    afterAll(async () => {
      await handle?.destroy();
      await scratch?.drop();
    });

    it('runs with the parameters given, building the query once per database', async () => {
      expect(await counterValue(handle.db, ['articles'])).toEqual([{ name: 'articles', value: 0 }]);
      expect(await counterValue(handle.db, ['content_version'])).toEqual([{ name: 'content_version', value: expect.any(Number) }]);
      expect(await counterValue(handle.db, ['no such counter'])).toEqual([]);
      expect(builds).toBe(1);
    });

    it('runs inside a transaction on its connection, building it afresh there', async () => {
      const before = builds;
      const rolledBack = handle.db.transaction().execute(async (trx) => {
        await trx.updateTable('counters').set({ value: 41 }).where('name', '=', 'articles').execute();
        expect(await counterValue(trx, ['articles'])).toEqual([{ name: 'articles', value: 41 }]);
        throw new Error('roll back');
      });
      // Any other error (a failed expectation inside) fails the test.
      await expect(rolledBack).rejects.toThrow(/^roll back$/);
      expect(builds).toBe(before + 1);
      expect(await counterValue(handle.db, ['articles'])).toEqual([{ name: 'articles', value: 0 }]);
    });

    it('never shows another request a transaction that is still open, on the database handle itself', async () => {
      let readBeside: Promise<unknown> | undefined;
      const rolledBack = handle.db.transaction().execute(async (trx) => {
        await trx.updateTable('counters').set({ value: 77 }).where('name', '=', 'articles').execute();
        readBeside = counterValue(handle.db, ['articles']);
        // Long enough for a read that did not wait for the transaction to have answered.
        await new Promise((resolve) => setTimeout(resolve, 50));
        throw new Error('roll back');
      });
      await expect(rolledBack).rejects.toThrow(/^roll back$/);
      expect(await readBeside).toEqual([{ name: 'articles', value: 0 }]);
    });

    it('refuses parameters that do not match the placeholders', async () => {
      await expect(counterValue(handle.db, [])).rejects.toThrow(/takes 1 parameters, not 0/);
      await expect(counterValue(handle.db, ['a', 'b'])).rejects.toThrow(/takes 1 parameters, not 2/);
    });
  });
}
