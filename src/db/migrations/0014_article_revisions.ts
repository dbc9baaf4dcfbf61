import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';
import type { MigrationProgress } from './0011_article_search.js';

/**
 * The kept versions of each article's content (modules/revisions). Every article already there gets one revision of
 * its current content, dated when that content was last written, in one statement: no row passes through the app,
 * so a million articles cost one copy inside the database. The index goes on after the copy, built once instead of
 * grown row by row.
 */
export function articleRevisions(dialect: Dialect, progress: MigrationProgress) {
  const postgres = dialect === 'postgres';
  return {
    async up(db: Kysely<unknown>) {
      const started = Date.now();
      await db.schema
        .createTable('article_revisions')
        // Every content edit adds a row, so the ids outrun the articles' own: BIGINT on PostgreSQL, as events do.
        .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
          postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
        )
        .addColumn('article_id', 'integer', (c) => c.notNull().references('articles.id').onDelete('cascade'))
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('description', 'text', (c) => c.notNull())
        .addColumn('body', 'text', (c) => c.notNull())
        // The tag names as a JSON array, as articles.tag_list holds them.
        .addColumn('tag_list', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      const copied = await sql`insert into article_revisions (article_id, title, description, body, tag_list, created_at)
        select id, title, description, body, tag_list, updated_at from articles order by id`.execute(db);
      // Said only when there was work, as the search index's backfill does: an empty database migrates silently.
      const articles = Number(copied.numAffectedRows ?? 0);
      if (articles > 0) progress(`0014: a revision of each of ${articles} articles (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      // An article's revisions newest first, the cascade of its deletion, and the trim past the newest 100.
      await db.schema.createIndex('article_revisions_article_idx').on('article_revisions').columns(['article_id', 'id']).execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('article_revisions').execute();
    },
  };
}
