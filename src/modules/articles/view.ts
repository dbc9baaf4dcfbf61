import type { ExpressionBuilder, SelectQueryBuilder, SqlBool } from 'kysely';
import type { Executor } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { toIso } from '../../schemas.js';
import { followedByViewer, toProfile } from '../profiles/queries.js';
import { byCodePoint } from './tags.js';

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

export function toSummary(row: ArticleViewRow) {
  const tagList: string[] = JSON.parse(row.tag_list);
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
  };
}

/** The `{ article }` answer as this viewer sees it; undefined when there is no such article. */
export async function getArticleAnswer(db: Executor, where: { slug: string } | { id: number }, viewerId: number | null) {
  const base = db.selectFrom('articles');
  const query = 'slug' in where ? base.where('articles.slug', '=', where.slug) : base.where('articles.id', '=', where.id);
  const row = await withArticleView(query, viewerId).select('articles.body').executeTakeFirst();
  return row === undefined ? undefined : { article: { ...toSummary(row), body: row.body } };
}
