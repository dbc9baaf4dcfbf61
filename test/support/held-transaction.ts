import type { DatabaseHandle } from '../../src/db/index.js';

/**
 * A write transaction that inserts the tag `name`, then stays open (holding its connection, as a request's
 * transaction does across awaits) until `commit` is called. Resolves once the insert has run.
 */
export async function holdWriteTransaction(handle: DatabaseHandle, name: string): Promise<{ commit(): Promise<void> }> {
  let finish = () => {};
  const held = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let opened = () => {};
  const open = new Promise<void>((resolve) => {
    opened = resolve;
  });
  const done = handle.db.transaction().execute(async (trx) => {
    await trx.insertInto('tags').values({ name }).execute();
    opened();
    await held;
  });
  await open;
  return {
    commit: async () => {
      finish();
      await done;
    },
  };
}
