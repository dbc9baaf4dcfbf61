import type { ExpressionBuilder, SelectQueryBuilder, SqlBool } from 'kysely';
import { uniqueViolation } from '../../db/constraints.js';
import { dialectOf, type Executor } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import { toIso } from '../../schemas.js';
import { followedByViewer, toProfile } from '../profiles/queries.js';
import { identityKey } from '../users/queries.js';
import type { ArticleChanges, NewArticle } from './schemas.js';
import { slugify, suffixed } from './slug.js';

export interface ArticleFilters {
  tag?: string;
  author?: string;
  favorited?: string;
  /** Only articles by authors this user follows (the feed). */
  followedBy?: number;
}

export interface Page {
  limit: number;
  offset: number;
}

const SLUG_ATTEMPTS = 5;

const userIdByName = (db: Executor, username: string) =>
  db.selectFrom('users').select('users.id').where('users.username_key', '=', identityKey(username));

/** The articles matching every filter (AND); shared by a page and its total so they can never disagree. */
function filteredArticles(db: Executor, filters: ArticleFilters) {
  let query = db.selectFrom('articles');
  if (filters.author) {
    query = query.where('articles.author_id', '=', userIdByName(db, filters.author));
  }
  if (filters.tag) {
    const tagged = db
      .selectFrom('article_tags')
      .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
      .select('article_tags.article_id')
      .where('tags.name', '=', filters.tag);
    query = query.where('articles.id', 'in', tagged);
  }
  if (filters.favorited) {
    const favorites = db
      .selectFrom('favorites')
      .select('favorites.article_id')
      .where('favorites.user_id', '=', userIdByName(db, filters.favorited));
    query = query.where('articles.id', 'in', favorites);
  }
  if (filters.followedBy !== undefined) {
    const followed = db.selectFrom('follows').select('follows.followed_id').where('follows.follower_id', '=', filters.followedBy);
    query = query.where('articles.author_id', 'in', followed);
  }
  return query;
}

function favoritedByViewer(eb: ExpressionBuilder<Database, 'articles'>, viewerId: number | null) {
  if (viewerId === null) return eb.lit(false).$castTo<SqlBool>();
  return eb.exists(
    eb
      .selectFrom('favorites')
      .select(eb.lit(1).as('one'))
      .where('favorites.user_id', '=', viewerId)
      .whereRef('favorites.article_id', '=', 'articles.id'),
  );
}

/** Everything a list item shows, author and viewer flags included, in one query whatever the page size. */
function withCard(query: SelectQueryBuilder<Database, 'articles', object>, viewerId: number | null) {
  return query
    .innerJoin('users', 'users.id', 'articles.author_id')
    .select((eb) => [
      'articles.id',
      'articles.slug',
      'articles.title',
      'articles.description',
      'articles.favorites_count',
      'articles.created_at',
      'articles.updated_at',
      'users.username',
      'users.bio',
      'users.image',
      favoritedByViewer(eb, viewerId).as('favorited'),
      followedByViewer(eb, viewerId).as('following'),
    ]);
}

type CardRow = Awaited<ReturnType<ReturnType<typeof withCard>['executeTakeFirstOrThrow']>>;

/** Tag names of many articles in one query, each list sorted ascending. */
async function tagsOf(db: Executor, articleIds: number[]): Promise<Map<number, string[]>> {
  const tags = new Map<number, string[]>(articleIds.map((id) => [id, []]));
  if (articleIds.length === 0) return tags;
  const rows = await db
    .selectFrom('article_tags')
    .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
    .select(['article_tags.article_id', 'tags.name'])
    .where('article_tags.article_id', 'in', articleIds)
    .execute();
  for (const row of rows) tags.get(row.article_id)?.push(row.name);
  // Sorted here rather than in SQL: PostgreSQL collations and SQLite's byte order would disagree.
  for (const list of tags.values()) list.sort(byCodePoint);
  return tags;
}

export const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function toSummary(row: CardRow, tagList: string[]) {
  return {
    slug: row.slug,
    title: row.title,
    description: row.description,
    tagList,
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
    favorited: Boolean(row.favorited),
    favoritesCount: row.favorites_count,
    author: toProfile(row),
  };
}

export async function listArticles(db: Executor, filters: ArticleFilters, page: Page, viewerId: number | null) {
  const matching = filteredArticles(db, filters);
  const [rows, total] = await Promise.all([
    withCard(matching, viewerId)
      .orderBy('articles.created_at', 'desc')
      .orderBy('articles.id', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    matching.select((eb) => eb.fn.countAll<number>().as('count')).executeTakeFirstOrThrow(),
  ]);
  const tags = await tagsOf(db, rows.map((row) => row.id));
  return {
    articles: rows.map((row) => toSummary(row, tags.get(row.id) ?? [])),
    articlesCount: Number(total.count),
  };
}

export async function getArticleView(db: Executor, where: { slug: string } | { id: number }, viewerId: number | null) {
  const base = db.selectFrom('articles');
  const query = 'slug' in where ? base.where('articles.slug', '=', where.slug) : base.where('articles.id', '=', where.id);
  const row = await withCard(query, viewerId).select('articles.body').executeTakeFirst();
  if (row === undefined) return undefined;
  const tags = await tagsOf(db, [row.id]);
  return { ...toSummary(row, tags.get(row.id) ?? []), body: row.body };
}

/** The few columns that decide existence and ownership, before any write. */
export function findArticleRef(db: Executor, slug: string) {
  return db
    .selectFrom('articles')
    .select(['id', 'author_id', 'title', 'updated_at'])
    .where('slug', '=', slug)
    .executeTakeFirst();
}

/** The article's ref, or the contract's 404 when no article has that slug. */
export async function existingArticleRef(db: Executor, slug: string) {
  const article = await findArticleRef(db, slug);
  if (article === undefined) throw notFound('article');
  return article;
}

/** Trimmed, without duplicates: the form in which tags are stored. */
export const normalizeTags = (names: string[]) => [...new Set(names.map((name) => name.trim()))].sort(byCodePoint);

/**
 * Links `add` (names) to an article and unlinks `removeIds`, creating missing tags; the use counters move in
 * the same transaction. On PostgreSQL, concurrent edits of overlapping tags would deadlock if each locked its
 * tag rows in its own order, so all touched rows are locked at once in id order first, and new names are
 * inserted in name order. SQLite runs one writing transaction at a time and needs neither.
 */
async function changeTags(trx: Executor, articleId: number, add: string[], removeIds: number[]): Promise<void> {
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
    await trx.deleteFrom('article_tags').where('article_id', '=', articleId).where('tag_id', 'in', removeIds).execute();
    await moveCounters(removeIds, -1);
  }
  if (addIds.length > 0) {
    await trx.insertInto('article_tags').values(addIds.map((tag_id) => ({ article_id: articleId, tag_id }))).execute();
    await moveCounters(addIds, 1);
  }
}

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
    await changeTags(trx, id, normalizeTags(article.tagList ?? []), []);
    return id;
  });
}

type ArticleRef = NonNullable<Awaited<ReturnType<typeof findArticleRef>>>;

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
    if (changes.tagList !== undefined) await replaceTags(trx, article.id, normalizeTags(changes.tagList));
    return true;
  };
  return titleChanged ? withFreeSlug(db, changes.title!, write) : inTransaction(db, (trx) => write(trx));
}

async function replaceTags(trx: Executor, articleId: number, names: string[]): Promise<void> {
  const current = await trx
    .selectFrom('article_tags')
    .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
    .select(['tags.id', 'tags.name'])
    .where('article_tags.article_id', '=', articleId)
    .execute();
  const wanted = new Set(names);
  const kept = new Set(current.map((tag) => tag.name));
  const removeIds = current.filter((tag) => !wanted.has(tag.name)).map((tag) => tag.id);
  await changeTags(trx, articleId, names.filter((name) => !kept.has(name)), removeIds);
}

/** Comments, favorites and tag links go by cascade; tag counters are settled first, in the same transaction. */
export function deleteArticle(db: Executor, articleId: number): Promise<void> {
  return inTransaction(db, async (trx) => {
    const links = await trx.selectFrom('article_tags').select('tag_id').where('article_id', '=', articleId).execute();
    await changeTags(trx, articleId, [], links.map((link) => link.tag_id));
    await trx.deleteFrom('articles').where('id', '=', articleId).execute();
  });
}

/** Idempotent; the counter moves only when a row was really added or removed, in the same transaction. */
export function setFavorite(db: Executor, userId: number, articleId: number, favorite: boolean, now: number) {
  return inTransaction(db, async (trx) => {
    const changed = favorite
      ? await trx
          .insertInto('favorites')
          .values({ user_id: userId, article_id: articleId, created_at: now })
          .onConflict((oc) => oc.columns(['user_id', 'article_id']).doNothing())
          .returning('article_id')
          .executeTakeFirst()
      : await trx
          .deleteFrom('favorites')
          .where('user_id', '=', userId)
          .where('article_id', '=', articleId)
          .returning('article_id')
          .executeTakeFirst();
    if (changed === undefined) return;
    await trx
      .updateTable('articles')
      .set((eb) => ({ favorites_count: eb('favorites_count', '+', favorite ? 1 : -1) }))
      .where('id', '=', articleId)
      .execute();
  });
}
