import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Dialect } from '../index.js';
import { countTriggers } from './0005_counts_by_triggers.js';

/**
 * The tag links' triggers leave an article's tag_list alone when it already says what the link says: the write path
 * now sets the final list on the article row in the statement that writes the article, so creating an article with
 * k tags rewrites its row (and re-indexes it for search, migration 0011) once instead of k + 1 times. A link added
 * or removed by hand in SQL still moves the list.
 */
export function tagListWithArticle(dialect: Dialect): Migration {
  const replace = async (db: Kysely<unknown>, guarded: boolean) => {
    const { create, drop } = countTriggers(dialect, { guarded, counts: 'all', only: 'article_tags' });
    for (const statement of [...drop, ...create]) await sql.raw(statement).execute(db);
  };
  return {
    up: (db) => replace(db, true),
    down: (db) => replace(db, false),
  };
}
