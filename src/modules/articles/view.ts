import type { ExpressionBuilder, SelectQueryBuilder, SqlBool } from 'kysely';
import type { Executor } from '../../db/index.js';
import { preparedQuery } from '../../db/prepared.js';
import type { Database } from '../../db/schema.js';
import { moderationState, toIso } from '../../schemas.js';
import type { Screening } from '../profiles/blocks.js';
import { followedByViewer, toProfile } from '../profiles/queries.js';
import { currentState } from './lifecycle.js';
import { byCodePoint } from './tags.js';
import { type ReaderValues, reachableArticles, readerValues } from './visibility.js';

type ArticleScope = ExpressionBuilder<Database, 'articles' | 'users'>;

/** "Has the viewer favorited this article?" for the outer query's article; anonymous viewers favorite nothing. */
function favoritedByViewer(eb: ArticleScope, viewerId: number | null) {
  if (viewerId === null) return eb.lit(false).$castTo<SqlBool>();
  return eb.exists(
    eb
      .selectFrom('favorites')
      .select(eb.lit(1).as('one'))
      .where('favorites.user_id', '=', viewerId)
      .whereRef('favorites.article_id', '=', 'articles.id'),
  );
}

/**
 * Everything an article answer shows as this viewer sees it (author, tags, favorited and following flags) in the
 * one statement that finds the articles: a page of any size is one query, each article a few primary-key lookups.
 */
export function withArticleView(query: SelectQueryBuilder<Database, 'articles', object>, viewerId: number | null) {
  return query
    .innerJoin('users', 'users.id', 'articles.author_id')
    .select((eb) => [
      'articles.slug',
      'articles.title',
      'articles.description',
      'articles.favorites_count',
      'articles.tag_list',
      'articles.status',
      'articles.publish_at',
      'articles.published_at',
      'articles.hidden_reason',
      'articles.created_at',
      'articles.updated_at',
      'users.username',
      'users.bio',
      'users.image',
      favoritedByViewer(eb, viewerId).as('favorited'),
      followedByViewer(eb, viewerId).as('following'),
    ]);
}

type ArticleViewRow = Awaited<ReturnType<ReturnType<typeof withArticleView>['executeTakeFirstOrThrow']>>;

export function toSummary(row: ArticleViewRow, now: number) {
  const tagList: string[] = JSON.parse(row.tag_list);
  // A scheduled article whose time has come reads as published, whether or not the scheduler has recorded it yet.
  const state = currentState(row, now);
  return {
    slug: row.slug,
    title: row.title,
    description: row.description,
    // Sorted on the way out: lists filled in SQL (migration 0005, bulk loads) come in the database's order.
    tagList: tagList.sort(byCodePoint),
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
    // SQLite answers EXISTS with 0/1, PostgreSQL with a boolean.
    favorited: Boolean(row.favorited),
    favoritesCount: row.favorites_count,
    author: toProfile(row),
    status: state.status,
    publishAt: state.publish_at === null ? null : toIso(state.publish_at),
    publishedAt: state.published_at === null ? null : toIso(state.published_at),
    ...moderationState(row.hidden_reason),
  };
}

/**
 * The `{ article }` answer as this viewer sees it; undefined when there is no such article or it is not theirs to see,
 * which with `screener` (profiles/blocks.ts) includes an article whose author a block separates from the viewer. A
 * muted author's article stays reachable by its link: a mute only keeps it out of the muter's lists.
 */
export async function getArticleAnswer(
  db: Executor,
  where: { slug: string } | { id: number },
  viewerId: number | null,
  screener: Screening | null = null,
  moderator = false,
) {
  const reader = readerValues(viewerId, screener, moderator);
  const row = await articleAnswer.executeTakeFirst(db, { ...where, ...reader });
  return row === undefined ? undefined : { article: { ...toSummary(row, reader.now), body: row.body } };
}

/** One article with its body: read on every article page, so built once per shape (db/prepared.ts). */
const articleAnswer = preparedQuery((db: Executor, values: ReaderValues & { slug?: string; id?: number }) => {
  const reachable = reachableArticles(db, values);
  const query =
    values.slug !== undefined ? reachable.where('articles.slug', '=', values.slug) : reachable.where('articles.id', '=', values.id!);
  return withArticleView(query, values.viewerId ?? null).select('articles.body');
});
