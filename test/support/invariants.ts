import { sql } from 'kysely';
import type { Executor } from '../../src/db/index.js';

/** Articles whose stored tag_list names other tags than their article_tags rows. */
async function tagListMismatches(db: Executor): Promise<number> {
  const links = await db
    .selectFrom('article_tags')
    .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
    .select(['article_tags.article_id', 'tags.name'])
    .execute();
  const linked = new Map<number, string[]>();
  for (const link of links) linked.set(link.article_id, [...(linked.get(link.article_id) ?? []), link.name]);
  const articles = await db.selectFrom('articles').select(['id', 'tag_list']).execute();
  const sorted = (names: string[]) => JSON.stringify([...names].sort());
  return articles.filter((article) => sorted(JSON.parse(article.tag_list)) !== sorted(linked.get(article.id) ?? [])).length;
}

/**
 * For every stored figure the server trusts instead of counting (counts, the striped total, copied creation times), the number
 * of rows where it disagrees with the rows it stands for. All zeros means the bookkeeping is exact.
 */
export async function derivedDataMismatches(db: Executor) {
  const count = async (query: ReturnType<typeof sql<{ n: number | string }>>) => Number((await query.execute(db)).rows[0]?.n);
  const counterMismatches = (table: string, counter: string, links: string, key: string) =>
    count(sql`
      select count(*) as n from ${sql.table(table)} as counted
      where ${sql.ref(`counted.${counter}`)} <> (select count(*) from ${sql.table(links)} as link where ${sql.ref(`link.${key}`)} = counted.id)
    `);
  const copiedTimeMismatches = (links: string) =>
    count(sql`
      select count(*) as n from ${sql.table(links)} as link join articles on articles.id = link.article_id
      where link.article_created_at <> articles.created_at
    `);
  return {
    articleFavorites: await counterMismatches('articles', 'favorites_count', 'favorites', 'article_id'),
    tagArticles: await counterMismatches('tags', 'article_count', 'article_tags', 'tag_id'),
    userArticles: await counterMismatches('users', 'articles_count', 'articles', 'author_id'),
    userFavorites: await counterMismatches('users', 'favorites_count', 'favorites', 'user_id'),
    articleTotal: await count(
      sql`select count(*) as n from (select sum(articles) as total from article_totals) as striped where total <> (select count(*) from articles)`,
    ),
    tagLinkTimes: await copiedTimeMismatches('article_tags'),
    tagLists: await tagListMismatches(db),
    favoriteTimes: await copiedTimeMismatches('favorites'),
  };
}

export const NO_MISMATCHES = {
  articleFavorites: 0,
  tagArticles: 0,
  userArticles: 0,
  userFavorites: 0,
  articleTotal: 0,
  tagLinkTimes: 0,
  tagLists: 0,
  favoriteTimes: 0,
};
