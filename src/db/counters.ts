import { coalesced } from './coalesced.js';
import { dialectOf, type Dialect, type Executor } from './index.js';
import { perDatabase } from './per-database.js';
import { precompiled } from './precompiled.js';

/**
 * `articles`: every article. `tag_usage_version`: moves whenever a tag's use count does.
 * `content_version`: moves with every write that changes what an article list, an article or its comments
 * show (articles, their tags, favorites, comments, follows, author profiles). `account_version`: moves with
 * every change to a user's account, by triggers (migration 0004).
 */
export type CounterName = 'articles' | 'tag_usage_version' | 'content_version' | 'account_version';

/** Moves a named total inside the caller's transaction, so it commits or rolls back with the rows it counts. */
export async function moveCounter(trx: Executor, name: CounterName, delta: number): Promise<void> {
  await trx
    .updateTable('counters')
    .set((eb) => ({ value: eb('value', '+', delta) }))
    .where('name', '=', name)
    .execute();
}

const counterValue = precompiled((db) => db.selectFrom('counters').select('value').where('name', '=', 'articles'));

async function readCounterAlone(db: Executor, name: CounterName): Promise<number> {
  const [row] = await counterValue(db, [name]);
  if (row === undefined) throw new Error(`the counters table has no "${name}" row: is the database migrated?`);
  return Number(row.value);
}

/**
 * SQLite answers a read synchronously, so a read shared there waits for the event loop's next turn: by then every
 * request the loop took in at once has joined it. PostgreSQL's round trip is the wait.
 */
const waitFor: Record<Dialect, (() => Promise<void>) | undefined> = {
  sqlite: () => new Promise((resolve) => setImmediate(resolve)),
  postgres: undefined,
};

const sharedReads = perDatabase((db) => {
  const reads = new Map<CounterName, () => Promise<number>>();
  return (name: CounterName) => {
    let read = reads.get(name);
    if (read === undefined) reads.set(name, (read = coalesced(() => readCounterAlone(db, name), waitFor[dialectOf(db)])));
    return read;
  };
});

/**
 * Read before every cached answer, so concurrent requests share the lookup (see coalesced): on PostgreSQL each
 * one is a round trip. A missing row would silently freeze every cache built on it, so it is an error.
 */
export const readCounter = (db: Executor, name: CounterName): Promise<number> => sharedReads(db)(name)();

/**
 * Sets every counter from the rows themselves, for bulk writes that bypass the per-row bookkeeping (seeding,
 * which writes the copied creation times with the rows). Linear in the data, so never on a request path.
 */
export async function recountAll(trx: Executor): Promise<void> {
  await trx
    .updateTable('users')
    .set((eb) => ({
      articles_count: eb.selectFrom('articles').select(eb.fn.countAll<number>().as('n')).whereRef('articles.author_id', '=', 'users.id'),
      favorites_count: eb.selectFrom('favorites').select(eb.fn.countAll<number>().as('n')).whereRef('favorites.user_id', '=', 'users.id'),
    }))
    .execute();
  await trx
    .updateTable('articles')
    .set((eb) => ({
      favorites_count: eb.selectFrom('favorites').select(eb.fn.countAll<number>().as('n')).whereRef('favorites.article_id', '=', 'articles.id'),
    }))
    .execute();
  await trx
    .updateTable('tags')
    .set((eb) => ({
      article_count: eb.selectFrom('article_tags').select(eb.fn.countAll<number>().as('n')).whereRef('article_tags.tag_id', '=', 'tags.id'),
    }))
    .execute();
  await trx
    .updateTable('counters')
    .set((eb) => ({ value: eb.selectFrom('articles').select(eb.fn.countAll<number>().as('n')) }))
    .where('name', '=', 'articles')
    .execute();
  await moveCounter(trx, 'tag_usage_version', 1);
  await moveCounter(trx, 'content_version', 1);
}
