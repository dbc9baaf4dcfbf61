import { uniqueViolation } from '../../db/constraints.js';
import { moveCounter } from '../../db/counters.js';
import { dialectOf, type Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import type { ArticleChanges, NewArticle } from './schemas.js';
import { slugify, suffixed } from './slug.js';
import { byCodePoint, normalizeTags } from './tags.js';

const SLUG_ATTEMPTS = 5;

/** The few columns that decide existence and ownership, before any write. */
export function findArticleRef(db: Executor, slug: string) {
  return db
    .selectFrom('articles')
    .select(['id', 'author_id', 'title', 'created_at', 'updated_at'])
    .where('slug', '=', slug)
    .executeTakeFirst();
}

export type ArticleRef = NonNullable<Awaited<ReturnType<typeof findArticleRef>>>;

/** The article's ref, or the contract's 404 when no article has that slug. */
export async function existingArticleRef(db: Executor, slug: string) {
  const article = await findArticleRef(db, slug);
  if (article === undefined) throw notFound('article');
  return article;
}

/**
 * Links `add` (names) to an article and unlinks `removeIds`, creating missing tags; the use counters and the
 * tag-usage version move in the same transaction. On PostgreSQL, concurrent edits of overlapping tags would
 * deadlock if each locked its tag rows in its own order, so all touched rows are locked at once in id order
 * first, and new names are inserted in name order. SQLite runs one writing transaction at a time and needs neither.
 * Lock order everywhere: tags, then counters, then users, and `content_version` last of all (a transaction
 * holding it takes no other lock, so waiting for it cannot close a cycle). `account_version` is the one counter
 * taken after users, by the triggers on them; no transaction holding it goes on to lock a user row.
 */
async function changeTags(trx: Executor, article: Pick<ArticleRef, 'id' | 'created_at'>, add: string[], removeIds: number[]) {
  let addIds: number[] = [];
  if (add.length > 0) {
    await trx
      .insertInto('tags')
      .values([...add].sort(byCodePoint).map((name) => ({ name })))
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    addIds = (await trx.selectFrom('tags').select('id').where('name', 'in', add).execute()).map((tag) => tag.id);
  }
  const touched = [...addIds, ...removeIds];
  if (touched.length === 0) return;
  if (dialectOf(trx) === 'postgres') {
    await trx.selectFrom('tags').select('id').where('id', 'in', touched).orderBy('id').forUpdate().execute();
  }
  const moveCounters = (ids: number[], delta: 1 | -1) =>
    trx
      .updateTable('tags')
      .set((eb) => ({ article_count: eb('article_count', '+', delta) }))
      .where('id', 'in', ids)
      .execute();
  if (removeIds.length > 0) {
    await trx.deleteFrom('article_tags').where('article_id', '=', article.id).where('tag_id', 'in', removeIds).execute();
    await moveCounters(removeIds, -1);
  }
  if (addIds.length > 0) {
    await trx
      .insertInto('article_tags')
      .values(addIds.map((tag_id) => ({ article_id: article.id, tag_id, article_created_at: article.created_at })))
      .execute();
    await moveCounters(addIds, 1);
  }
  await moveCounter(trx, 'tag_usage_version', 1);
}

const moveUserCounter = (trx: Executor, column: 'articles_count' | 'favorites_count', userId: number, delta: 1 | -1) =>
  trx
    .updateTable('users')
    .set((eb) => ({ [column]: eb(column, '+', delta) }))
    .where('id', '=', userId)
    .execute();

/**
 * Runs a write that sets a slug derived from `title`; when the slug is taken (the unique key says so,
 * also under concurrency) the whole transaction runs again with a suffixed slug.
 */
async function withFreeSlug<T>(db: Executor, title: string, write: (trx: Executor, slug: string) => Promise<T>): Promise<T> {
  const base = slugify(title);
  for (let attempt = 1; ; attempt++) {
    const slug = attempt === 1 ? base : suffixed(base);
    try {
      return await inTransaction(db, (trx) => write(trx, slug));
    } catch (error) {
      if (attempt >= SLUG_ATTEMPTS || uniqueViolation(error) !== 'slug') throw error;
    }
  }
}

export function createArticle(db: Executor, authorId: number, article: NewArticle, now: number): Promise<number> {
  return withFreeSlug(db, article.title, async (trx, slug) => {
    const { id } = await trx
      .insertInto('articles')
      .values({
        slug,
        title: article.title,
        description: article.description,
        body: article.body,
        author_id: authorId,
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await changeTags(trx, { id, created_at: now }, normalizeTags(article.tagList ?? []), []);
    await moveCounter(trx, 'articles', 1);
    await moveUserCounter(trx, 'articles_count', authorId, 1);
    await moveCounter(trx, 'content_version', 1);
    return id;
  });
}

/** Applies a partial update; returns false when the article vanished meanwhile. */
export async function updateArticle(db: Executor, article: ArticleRef, changes: ArticleChanges, now: number) {
  // updatedAt must move on every update, even two within one millisecond.
  const updatedAt = Math.max(now, article.updated_at + 1);
  const titleChanged = changes.title !== undefined && slugify(changes.title) !== slugify(article.title);
  const write = async (trx: Executor, slug?: string) => {
    const result = await trx
      .updateTable('articles')
      .set({
        updated_at: updatedAt,
        ...(slug !== undefined && { slug }),
        ...(changes.title !== undefined && { title: changes.title }),
        ...(changes.description !== undefined && { description: changes.description }),
        ...(changes.body !== undefined && { body: changes.body }),
      })
      .where('id', '=', article.id)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) return false;
    if (changes.tagList !== undefined) await replaceTags(trx, article, normalizeTags(changes.tagList));
    await moveCounter(trx, 'content_version', 1);
    return true;
  };
  return titleChanged ? withFreeSlug(db, changes.title!, write) : inTransaction(db, (trx) => write(trx));
}

async function replaceTags(trx: Executor, article: ArticleRef, names: string[]): Promise<void> {
  const current = await trx
    .selectFrom('article_tags')
    .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
    .select(['tags.id', 'tags.name'])
    .where('article_tags.article_id', '=', article.id)
    .execute();
  const wanted = new Set(names);
  const kept = new Set(current.map((tag) => tag.name));
  const removeIds = current.filter((tag) => !wanted.has(tag.name)).map((tag) => tag.id);
  await changeTags(
    trx,
    article,
    names.filter((name) => !kept.has(name)),
    removeIds,
  );
}

/**
 * Comments, favorites and tag links go by cascade; every counter over them is settled first, in the same
 * transaction. On PostgreSQL the article row is locked first: a favorite being added meanwhile either
 * finishes before (and is counted here) or waits and then finds the article gone.
 */
export function deleteArticle(db: Executor, article: Pick<ArticleRef, 'id' | 'author_id' | 'created_at'>): Promise<void> {
  return inTransaction(db, async (trx) => {
    if (dialectOf(trx) === 'postgres') {
      await trx.selectFrom('articles').select('id').where('id', '=', article.id).forUpdate().execute();
    }
    const links = await trx.selectFrom('article_tags').select('tag_id').where('article_id', '=', article.id).execute();
    await changeTags(
      trx,
      article,
      [],
      links.map((link) => link.tag_id),
    );
    await moveCounter(trx, 'articles', -1);
    await moveUserCounter(trx, 'articles_count', article.author_id, -1);
    await trx
      .updateTable('users')
      .set((eb) => ({ favorites_count: eb('favorites_count', '-', 1) }))
      .where('id', 'in', trx.selectFrom('favorites').select('user_id').where('article_id', '=', article.id))
      .execute();
    await trx.deleteFrom('articles').where('id', '=', article.id).execute();
    await moveCounter(trx, 'content_version', 1);
  });
}

/** Idempotent; the counters move only when a row was really added or removed, in the same transaction. */
export function setFavorite(db: Executor, userId: number, article: Pick<ArticleRef, 'id' | 'created_at'>, favorite: boolean, now: number) {
  return inTransaction(db, async (trx) => {
    const changed = favorite
      ? await trx
          .insertInto('favorites')
          .values({ user_id: userId, article_id: article.id, article_created_at: article.created_at, created_at: now })
          .onConflict((oc) => oc.columns(['user_id', 'article_id']).doNothing())
          .returning('article_id')
          .executeTakeFirst()
      : await trx
          .deleteFrom('favorites')
          .where('user_id', '=', userId)
          .where('article_id', '=', article.id)
          .returning('article_id')
          .executeTakeFirst();
    if (changed === undefined) return;
    const delta = favorite ? 1 : -1;
    await trx
      .updateTable('articles')
      .set((eb) => ({ favorites_count: eb('favorites_count', '+', delta) }))
      .where('id', '=', article.id)
      .execute();
    await moveUserCounter(trx, 'favorites_count', userId, delta);
    await moveCounter(trx, 'content_version', 1);
  });
}
