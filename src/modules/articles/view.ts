import { type SelectQueryBuilder, sql } from 'kysely';
import { readCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { perDatabase } from '../../db/per-database.js';
import type { Database } from '../../db/schema.js';
import { VersionedCache } from '../../db/versioned-cache.js';
import { toIso } from '../../schemas.js';
import { shareAnswer } from '../../shared-answers.js';
import { toProfile } from '../profiles/queries.js';
import { byCodePoint } from './tags.js';

/** What everyone sees of a list item, with the ids the viewer's flags are looked up by. */
export interface ArticleCard {
  id: number;
  authorId: number;
  summary: ReturnType<typeof toSummary>;
}

/** Everything a list item shows but the viewer's flags, in one query whatever the page size. */
export function withCard(query: SelectQueryBuilder<Database, 'articles', object>) {
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

export async function loadCards(db: Executor, rows: CardRow[]): Promise<ArticleCard[]> {
  const tags = await tagsOf(
    db,
    rows.map((row) => row.id),
  );
  return rows.map((row) => ({ id: row.id, authorId: row.author_id, summary: toSummary(row, tags.get(row.id) ?? []) }));
}

/** An article's card, and the answer every anonymous reader gets (its body included). */
interface ArticleDetail {
  card: ArticleCard;
  anonymous: ArticleAnswer;
}
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
interface ArticleAnswer {
  article: ArticleView;
}

/**
 * Articles, per database, valid while `content_version` stands still: every write that changes what they show
 * moves it in the same transaction (see write.ts and profiles/users queries). A read costs one primary-key lookup
 * when nothing was written meanwhile. What anonymous readers get is kept with the article; a signed-in viewer's
 * own answers (their favorited and following flags laid over the shared card) are kept apart, since favorites and
 * follows move the same version. Every kept answer is shared, so frozen (see shareAnswer).
 */
const cachesFor = perDatabase((db) => ({
  articles: new VersionedCache<ArticleDetail | null>(db, ARTICLE_CACHE_CHARACTERS, (detail) =>
    detail === null ? 1 : weighArticle(detail.anonymous),
  ),
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
export async function forViewer(db: Executor, cards: ArticleCard[], viewerId: number) {
  if (cards.length === 0) return [];
  const flags = await loadViewerFlags(db, cards, viewerId);
  return cards.map(({ id, authorId, summary }) => ({
    ...summary,
    favorited: flags.favorited.has(id),
    author: { ...summary.author, following: flags.followed.has(authorId) },
  }));
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
