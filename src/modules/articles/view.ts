import { type ExpressionBuilder, type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { toIso } from '../../schemas.js';
import { followedByViewer, toProfile } from '../profiles/queries.js';
import { byCodePoint } from './tags.js';

type ArticleScope = ExpressionBuilder<Database, 'articles' | 'users'>;

/** The article's tag names as a JSON array (SQLite hands it over as text), from the tag links' primary key. */
function tagNamesOf(db: Executor) {
  return dialectOf(db) === 'postgres'
    ? sql<string[] | string>`(select coalesce(json_agg(tags.name), '[]') from article_tags join tags on tags.id = article_tags.tag_id
        where article_tags.article_id = articles.id)`
    : sql<string[] | string>`(select json_group_array(tags.name) from article_tags join tags on tags.id = article_tags.tag_id
        where article_tags.article_id = articles.id)`;
}

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
export function withArticleView(db: Executor, query: SelectQueryBuilder<Database, 'articles', object>, viewerId: number | null) {
  return query
    .innerJoin('users', 'users.id', 'articles.author_id')
    .select((eb) => [
      'articles.slug',
      'articles.title',
      'articles.description',
      'articles.favorites_count',
      'articles.created_at',
      'articles.updated_at',
      'users.username',
      'users.bio',
      'users.image',
      tagNamesOf(db).as('tag_names'),
      favoritedByViewer(eb, viewerId).as('favorited'),
      followedByViewer(eb, viewerId).as('following'),
    ]);
}

type ArticleViewRow = Awaited<ReturnType<ReturnType<typeof withArticleView>['executeTakeFirstOrThrow']>>;

/** A list item: SQLite hands the tag names over as JSON text, PostgreSQL as an array. */
export function toSummary(row: ArticleViewRow) {
  const tagList: string[] = typeof row.tag_names === 'string' ? JSON.parse(row.tag_names) : row.tag_names;
  return {
    slug: row.slug,
    title: row.title,
    description: row.description,
    // Sorted here rather than in SQL: PostgreSQL collations and SQLite's byte order would disagree.
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
  const row = await withArticleView(db, query, viewerId).select('articles.body').executeTakeFirst();
  return row === undefined ? undefined : { article: { ...toSummary(row), body: row.body } };
}
