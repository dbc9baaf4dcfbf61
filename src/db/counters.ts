import { coalesced } from './coalesced.js';
import { type Dialect, dialectOf, type Executor } from './index.js';
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

const everyCounter = precompiled((db) => db.selectFrom('counters').select(['name', 'value']));

type Counters = ReadonlyMap<string, number>;

async function readCountersAlone(db: Executor): Promise<Counters> {
  const rows = await everyCounter(db, []);
  return new Map(rows.map((row) => [row.name, Number(row.value)]));
}

/**
 * SQLite answers a read synchronously, so a read shared there waits for the event loop's next turn: by then every
 * request the loop took in at once has joined it. PostgreSQL's round trip is the wait.
 */
const waitFor: Record<Dialect, (() => Promise<void>) | undefined> = {
  sqlite: () => new Promise((resolve) => setImmediate(resolve)),
  postgres: undefined,
};

/**
 * One read of the whole (four-row) table serves every counter: a signed-in request wants two versions, and
 * requests after different counters join the same lookup instead of queueing in separate streams.
 */
const sharedReads = perDatabase((db) => coalesced(() => readCountersAlone(db), waitFor[dialectOf(db)]));

/**
 * Read before every cached answer, so concurrent requests share the lookup (see coalesced): on PostgreSQL each
 * one is a round trip. A missing row would silently freeze every cache built on it, so it is an error.
 */
export async function readCounter(db: Executor, name: CounterName): Promise<number> {
  const value = (await sharedReads(db)()).get(name);
  if (value === undefined) throw new Error(`the counters table has no "${name}" row: is the database migrated?`);
  return value;
}

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
      favorites_count: eb
        .selectFrom('favorites')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('favorites.article_id', '=', 'articles.id'),
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
