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
 * For every stored figure the server trusts instead of counting (counts, the striped total, copied publication times), the
 * number of rows where it disagrees with the rows it stands for. All zeros means the bookkeeping is exact. With `listing`
 * (the schema from migration 0017 on), the counts lists show count published, not withheld articles only, and the
 * links carry their article's listed_at and whether it is counted.
 */
export async function derivedDataMismatches(db: Executor, { listing = true } = {}) {
  const count = async (query: ReturnType<typeof sql<{ n: number | string }>>) => Number((await query.execute(db)).rows[0]?.n);
  const listed = (alias: string) => sql.raw(listing ? ` and ${alias}.status = 'published' and ${alias}.withheld = 0` : '');
  const linkListed = sql.raw(listing ? ' and link.article_counted = 1' : '');
  const counterMismatches = (table: string, counter: string, links: string, key: string, only = sql``) =>
    count(sql`
      select count(*) as n from ${sql.table(table)} as counted
      where ${sql.ref(`counted.${counter}`)} <> (select count(*) from ${sql.table(links)} as link where ${sql.ref(`link.${key}`)} = counted.id ${only})
    `);
  const copiedTimeMismatches = (links: string) =>
    count(
      listing
        ? sql`
      select count(*) as n from ${sql.table(links)} as link join articles on articles.id = link.article_id
      where coalesce(link.article_listed_at, -1) <> coalesce(articles.listed_at, -1)
        or link.article_counted <> (case when articles.status = 'published' and articles.withheld = 0 then 1 else 0 end)`
        : sql`
      select count(*) as n from ${sql.table(links)} as link join articles on articles.id = link.article_id
      where link.article_created_at <> articles.created_at`,
    );
  return {
    articleFavorites: await counterMismatches('articles', 'favorites_count', 'favorites', 'article_id'),
    tagArticles: await counterMismatches('tags', 'article_count', 'article_tags', 'tag_id', linkListed),
    userArticles: await counterMismatches('users', 'articles_count', 'articles', 'author_id', listed('link')),
    userFavorites: await counterMismatches('users', 'favorites_count', 'favorites', 'user_id', linkListed),
    articleTotal: await count(
      sql`select count(*) as n from (select sum(articles) as total from article_totals) as striped
        where total <> (select count(*) from articles as link where 1 = 1 ${listed('link')})`,
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
