import { type Kysely, sql } from 'kysely';

/** The named totals and versions of 0003, the total counted from the articles there; 0005 replaces them. */
export async function createCounters(db: Kysely<unknown>) {
  await db.schema
    .createTable('counters')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into counters (name, value)
    select 'articles', count(*) from articles
    union all select 'tag_usage_version', 0
    union all select 'content_version', 0`.execute(db);
}

/**
 * What lists need to stay fast at millions of rows:
 * - counters for every `articlesCount` a single filter can ask for (all articles, by author, favorited by a user),
 *   so a total is one row read instead of a count over the matching rows;
 * - the article's creation time copied into the link tables (it never changes), so "newest first" for a tag or
 *   a user's favorites walks one index in order instead of sorting every match;
 * - version numbers that move with tag use and with everything a list shows, so those can be cached and
 *   invalidated exactly, also across processes.
 */
export const listCounters = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('users')
      .addColumn('articles_count', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('users')
      .addColumn('favorites_count', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await sql`update users set
      articles_count = (select count(*) from articles where articles.author_id = users.id),
      favorites_count = (select count(*) from favorites where favorites.user_id = users.id)`.execute(db);

    await createCounters(db);

    for (const table of ['article_tags', 'favorites'] as const) {
      // SQLite adds a NOT NULL column only with a default; every insert sets it, the default only serves the backfill.
      await db.schema
        .alterTable(table)
        .addColumn('article_created_at', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();
      await sql`update ${sql.table(table)} set article_created_at =
        (select created_at from articles where articles.id = ${sql.ref(`${table}.article_id`)})`.execute(db);
    }
    await db.schema.dropIndex('article_tags_tag_idx').execute();
    await db.schema
      .createIndex('article_tags_tag_created_idx')
      .on('article_tags')
      .columns(['tag_id', 'article_created_at', 'article_id'])
      .execute();
    await db.schema
      .createIndex('favorites_user_created_idx')
      .on('favorites')
      .columns(['user_id', 'article_created_at', 'article_id'])
      .execute();
  },

  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('favorites_user_created_idx').execute();
    await db.schema.dropIndex('article_tags_tag_created_idx').execute();
    await db.schema.createIndex('article_tags_tag_idx').on('article_tags').columns(['tag_id', 'article_id']).execute();
    for (const table of ['article_tags', 'favorites']) {
      await db.schema.alterTable(table).dropColumn('article_created_at').execute();
    }
    await db.schema.dropTable('counters').execute();
    await db.schema.alterTable('users').dropColumn('favorites_count').execute();
    await db.schema.alterTable('users').dropColumn('articles_count').execute();
  },
};
