import { type SelectQueryBuilder, sql } from 'kysely';
import { uniqueViolation } from '../../db/constraints.js';
import { moveCounter, readCounter } from '../../db/counters.js';
import { dialectOf, type Executor } from '../../db/index.js';
import { perDatabase } from '../../db/per-database.js';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { VersionedCache } from '../../db/versioned-cache.js';
import { notFound } from '../../errors.js';
import { toIso } from '../../schemas.js';
import { shareAnswer } from '../../shared-answers.js';
import { toProfile } from '../profiles/queries.js';
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

const tagIdByName = (db: Executor, name: string) => db.selectFrom('tags').select('tags.id').where('tags.name', '=', name);

/** Far below any epoch-millisecond timestamp: "no lower bound" in a comparison both databases accept. */
const NO_LOWER_BOUND = Number.MIN_SAFE_INTEGER;

/**
 * The ids of one page, newest first, read from the index that already holds the first filter's rows in that
 * order, so a page costs its offset plus limit index entries whatever the number of matches:
 * a tag's links and a user's favorites carry the article's created_at for this; an author's articles have
 * their own index. The other filters, when combined, narrow the walk.
 */
function pageIds(db: Executor, filters: ArticleFilters, page: Page) {
  if (filters.favorited || filters.tag) {
    const links = filters.favorited
      ? db
          .selectFrom('favorites as link')
          .where('link.user_id', '=', userIdByName(db, filters.favorited))
          .$if(Boolean(filters.tag), (query) =>
            query.where('link.article_id', 'in', (eb) =>
              eb
                .selectFrom('article_tags')
                .select('article_tags.article_id')
                .where('article_tags.tag_id', '=', tagIdByName(db, filters.tag!)),
            ),
          )
      : db.selectFrom('article_tags as link').where('link.tag_id', '=', tagIdByName(db, filters.tag!));
    const narrowed =
      filters.author || filters.followedBy !== undefined
        ? links.where(
            'link.article_id',
            'in',
            filteredArticles(db, { author: filters.author, followedBy: filters.followedBy }).select('articles.id'),
          )
        : links;
    return narrowed
      .select('link.article_id as id')
      .orderBy('link.article_created_at', 'desc')
      .orderBy('link.article_id', 'desc')
      .limit(page.limit)
      .offset(page.offset);
  }
  if (filters.followedBy !== undefined && !filters.author) return feedPageIds(db, filters.followedBy, page);
  return filteredArticles(db, filters)
    .select('articles.id')
    .orderBy('articles.created_at', 'desc')
    .orderBy('articles.id', 'desc')
    .limit(page.limit)
    .offset(page.offset);
}

/**
 * A feed page: each followed author contributes at most offset + limit of their newest articles (one bounded
 * walk of the author index each), and only those candidates are sorted. Following a prolific author therefore
 * costs no more than following a quiet one.
 */
function feedPageIds(db: Executor, followerId: number, page: Page) {
  const perAuthor = page.offset + page.limit;
  return db
    .selectFrom('follows')
    .innerJoin('articles', 'articles.author_id', 'follows.followed_id')
    .select('articles.id')
    .where('follows.follower_id', '=', followerId)
    .where((eb) =>
      eb(
        'articles.created_at',
        '>=',
        eb.fn.coalesce(
          eb
            .selectFrom('articles as newest')
            .select('newest.created_at')
            .whereRef('newest.author_id', '=', 'follows.followed_id')
            .orderBy('newest.created_at', 'desc')
            .orderBy('newest.id', 'desc')
            .limit(1)
            .offset(perAuthor - 1),
          eb.lit(NO_LOWER_BOUND),
        ),
      ),
    )
    .orderBy('articles.created_at', 'desc')
    .orderBy('articles.id', 'desc')
    .limit(page.limit)
    .offset(page.offset);
}

/** The articles matching every filter (AND); what a combined filter's total counts. */
function filteredArticles(db: Executor, filters: ArticleFilters) {
  let query = db.selectFrom('articles');
  if (filters.author) {
    query = query.where('articles.author_id', '=', userIdByName(db, filters.author));
  }
  if (filters.tag) {
    const tagged = db
      .selectFrom('article_tags')
      .select('article_tags.article_id')
      .where('article_tags.tag_id', '=', tagIdByName(db, filters.tag));
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

/**
 * `articlesCount` without counting: a single filter (or none) reads the counter kept beside its rows; only a
 * combination of filters counts the matches.
 */
async function totalMatching(db: Executor, filters: ArticleFilters): Promise<number> {
  const active = [filters.tag, filters.author, filters.favorited, filters.followedBy].filter(
    (value) => value !== undefined && value !== '',
  );
  if (active.length === 0) return readCounter(db, 'articles');
  let row: { count: number | string | bigint | null } | undefined;
  if (active.length > 1) {
    row = await filteredArticles(db, filters)
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirst();
  } else if (filters.tag) {
    row = await db.selectFrom('tags').select('article_count as count').where('name', '=', filters.tag).executeTakeFirst();
  } else if (filters.author || filters.favorited) {
    row = await db
      .selectFrom('users')
      .select(filters.author ? 'articles_count as count' : 'favorites_count as count')
      .where('username_key', '=', identityKey((filters.author || filters.favorited)!))
      .executeTakeFirst();
  } else {
    row = await db
      .selectFrom('follows')
      .innerJoin('users', 'users.id', 'follows.followed_id')
      .select((eb) => eb.fn.sum<number>('users.articles_count').as('count'))
      .where('follows.follower_id', '=', filters.followedBy!)
      .executeTakeFirst();
  }
  return Number(row?.count ?? 0);
}

/** What everyone sees of a list item, with the ids the viewer's flags are looked up by. */
interface ArticleCard {
  id: number;
  authorId: number;
  summary: ReturnType<typeof toSummary>;
}

/** Everything a list item shows but the viewer's flags, in one query whatever the page size. */
function withCard(query: SelectQueryBuilder<Database, 'articles', object>) {
  return query
    .innerJoin('users', 'users.id', 'articles.author_id')
    .select([
      'articles.id',
      'articles.author_id',
      'articles.slug',
      'articles.title',
      'articles.description',
      'articles.favorites_count',
      'articles.created_at',
      'articles.updated_at',
      'users.username',
      'users.bio',
      'users.image',
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
    favorited: false,
    favoritesCount: row.favorites_count,
    author: toProfile({ ...row, following: false }),
  };
}

async function loadCards(db: Executor, rows: CardRow[]): Promise<ArticleCard[]> {
  const tags = await tagsOf(
    db,
    rows.map((row) => row.id),
  );
  return rows.map((row) => ({ id: row.id, authorId: row.author_id, summary: toSummary(row, tags.get(row.id) ?? []) }));
}

/** A page's cards, and the answer every anonymous reader gets (its total and items). */
interface ArticlePage {
  cards: ArticleCard[];
  anonymous: ListAnswer;
}

/** An article's card, and the answer every anonymous reader gets (its body included). */
interface ArticleDetail {
  card: ArticleCard;
  anonymous: ArticleAnswer;
}

const PAGE_CACHE_ENTRIES = 2_000;
const VIEWER_LIST_ENTRIES = 1_000;
/**
 * Article caches are bounded by size, not count: a body runs up to 100,000 characters, and an answer is kept
 * with its encoding beside it. About 64 MB of text for each of the two caches at most.
 */
const ARTICLE_CACHE_CHARACTERS = 32_000_000;
const weighArticle = (answer: ArticleAnswer) => 1_000 + answer.article.body.length;

/** Which of a page's articles (ids) one viewer favorited and which of its authors (ids) they follow. */
interface ViewerFlags {
  favorited: Set<number>;
  followed: Set<number>;
}

type ArticleView = ArticleCard['summary'] & { body: string };
interface ListAnswer {
  articles: ArticleCard['summary'][];
  articlesCount: number;
}
interface ArticleAnswer {
  article: ArticleView;
}

/**
 * Pages and articles, per database, valid while `content_version` stands still: every write that changes what
 * they show moves it in the same transaction (see the write functions below and profiles/users queries). A read
 * costs one primary-key lookup when nothing was written meanwhile. What anonymous readers get is kept with the
 * page or article; a signed-in viewer's own answers (their favorited and following flags laid over the shared
 * cards) are kept apart, since favorites and follows move the same version. Every kept answer is shared, so
 * frozen (see shareAnswer).
 */
const cachesFor = perDatabase((db) => ({
  pages: new VersionedCache<ArticlePage>(db, PAGE_CACHE_ENTRIES),
  articles: new VersionedCache<ArticleDetail | null>(db, ARTICLE_CACHE_CHARACTERS, (detail) =>
    detail === null ? 1 : weighArticle(detail.anonymous),
  ),
  viewerLists: new VersionedCache<ListAnswer>(db, VIEWER_LIST_ENTRIES),
  viewerArticles: new VersionedCache<ArticleAnswer>(db, ARTICLE_CACHE_CHARACTERS, weighArticle),
}));

/** Which of these articles the viewer favorited and which of these authors they follow, in one query. */
async function loadViewerFlags(db: Executor, cards: ArticleCard[], viewerId: number): Promise<ViewerFlags> {
  const rows = await db
    .selectFrom('favorites')
    .select([sql<string>`'favorite'`.as('kind'), 'favorites.article_id as id'])
    .where('favorites.user_id', '=', viewerId)
    .where(
      'favorites.article_id',
      'in',
      cards.map((card) => card.id),
    )
    .unionAll(
      db
        .selectFrom('follows')
        .select([sql<string>`'follow'`.as('kind'), 'follows.followed_id as id'])
        .where('follows.follower_id', '=', viewerId)
        .where('follows.followed_id', 'in', [...new Set(cards.map((card) => card.authorId))]),
    )
    .execute();
  return {
    favorited: new Set(rows.filter((row) => row.kind === 'favorite').map((row) => Number(row.id))),
    followed: new Set(rows.filter((row) => row.kind === 'follow').map((row) => Number(row.id))),
  };
}

/** The viewer's own flags laid over shared cards. Cards are shared between requests, so they are copied, never changed. */
async function forViewer(db: Executor, cards: ArticleCard[], viewerId: number) {
  if (cards.length === 0) return [];
  const flags = await loadViewerFlags(db, cards, viewerId);
  return cards.map(({ id, authorId, summary }) => ({
    ...summary,
    favorited: flags.favorited.has(id),
    author: { ...summary.author, following: flags.followed.has(authorId) },
  }));
}

async function loadPage(db: Executor, filters: ArticleFilters, page: Page): Promise<ArticlePage> {
  const [rows, articlesCount] = await Promise.all([
    withCard(db.selectFrom('articles').where('articles.id', 'in', pageIds(db, filters, page)))
      .orderBy('articles.created_at', 'desc')
      .orderBy('articles.id', 'desc')
      .execute(),
    totalMatching(db, filters),
  ]);
  const cards = await loadCards(db, rows);
  return { cards, anonymous: shareAnswer({ articles: cards.map((card) => card.summary), articlesCount }) };
}

export async function listArticles(db: Executor, filters: ArticleFilters, page: Page, viewerId: number | null) {
  const version = await readCounter(db, 'content_version');
  const key = JSON.stringify([
    filters.tag || null,
    filters.author || null,
    filters.favorited || null,
    filters.followedBy ?? null,
    page.limit,
    page.offset,
  ]);
  const { cards, anonymous } = await cachesFor(db).pages.get(version, key, () => loadPage(db, filters, page));
  if (viewerId === null) return anonymous;
  return cachesFor(db).viewerLists.get(version, `${viewerId} ${key}`, async () =>
    shareAnswer({ articles: await forViewer(db, cards, viewerId), articlesCount: anonymous.articlesCount }),
  );
}

async function loadArticle(db: Executor, where: { slug: string } | { id: number }): Promise<ArticleDetail | null> {
  const base = db.selectFrom('articles');
  const query = 'slug' in where ? base.where('articles.slug', '=', where.slug) : base.where('articles.id', '=', where.id);
  const row = await withCard(query).select('articles.body').executeTakeFirst();
  if (row === undefined) return null;
  const [card] = await loadCards(db, [row]);
  return { card: card!, anonymous: shareAnswer({ article: { ...card!.summary, body: row.body } }) };
}

/** The `{ article }` answer as this viewer sees it; undefined when there is no such article. */
export async function getArticleAnswer(db: Executor, where: { slug: string } | { id: number }, viewerId: number | null) {
  const version = await readCounter(db, 'content_version');
  const key = 'slug' in where ? `slug:${where.slug}` : `id:${where.id}`;
  const detail = await cachesFor(db).articles.get(version, key, () => loadArticle(db, where));
  if (detail === null) return undefined;
  if (viewerId === null) return detail.anonymous;
  return cachesFor(db).viewerArticles.get(version, `${viewerId} ${key}`, async () => {
    const [summary] = await forViewer(db, [detail.card], viewerId);
    return shareAnswer({ article: { ...summary!, body: detail.anonymous.article.body } });
  });
}

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

/** Trimmed, without duplicates: the form in which tags are stored. */
export const normalizeTags = (names: string[]) => [...new Set(names.map((name) => name.trim()))].sort(byCodePoint);

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
