import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Dialect } from '../index.js';

/**
 * The account export (GET /api/user/export). `users.last_export_at` is the rate limit: one conditional UPDATE of
 * the account's own row takes the export slot, the same way whichever instance or process runs it.
 *
 * The export reads a user's articles and comments in batches by id. Without an index that starts (author, id), each
 * batch would walk all of the author's rows again to find where the previous one stopped, and a large account would
 * cost the square of its size; keying the batches on the author's existing (author, updated_at, id) index instead
 * would skip or repeat an article edited while the export runs. SQLite's comments_author_idx holds the rowid (the
 * id) after the author already; PostgreSQL's gets the id as a column.
 */
export function accountExport(dialect: Dialect): Migration {
  const postgres = dialect === 'postgres';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('users').addColumn('last_export_at', 'bigint').execute();
      await db.schema.createIndex('articles_author_id_idx').on('articles').columns(['author_id', 'id']).execute();
      if (postgres) {
        await db.schema.dropIndex('comments_author_idx').execute();
        await db.schema.createIndex('comments_author_idx').on('comments').columns(['author_id', 'id']).execute();
      }
    },
    async down(db: Kysely<unknown>) {
      if (postgres) {
        await db.schema.dropIndex('comments_author_idx').execute();
        await db.schema.createIndex('comments_author_idx').on('comments').columns(['author_id']).execute();
      }
      await db.schema.dropIndex('articles_author_id_idx').execute();
      await db.schema.alterTable('users').dropColumn('last_export_at').execute();
    },
  };
}
