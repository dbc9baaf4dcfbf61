import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';
import { createCounters } from './0003_list_counters.js';
import { accountVersion } from './0004_account_version.js';

/**
 * The number of rows the total of all articles is spread over. A write moves one of them (chosen by the article's
 * id, so consecutive inserts move different rows) and a list reads all of them: concurrent writers, also from
 * several instances, rarely meet on one row, and a sum of 16 rows costs a list next to nothing.
 */
export const ARTICLE_TOTAL_STRIPES = 16;

/** The article's tag names as a JSON array (in the database's order: readers sort it). */
function tagListOf(dialect: Dialect, articleId: string): string {
  const names = `from article_tags join tags on tags.id = article_tags.tag_id where article_tags.article_id = ${articleId}`;
  return dialect === 'sqlite'
    ? `(select json_group_array(tags.name) ${names})`
    : `coalesce((select json_agg(tags.name) ${names})::text, '[]')`;
}

/**
 * Whether the tag named by the link `row` is in its article's tag_list already. A write path that sets the final
 * list on the article row itself (migration 0012) makes every link it then adds or removes a no-op for the row,
 * instead of one rewrite of the article, and of its search index entry, per tag.
 */
function inTagList(dialect: Dialect, row: string): string {
  const name = `(select name from tags where id = ${row}.tag_id)`;
  return dialect === 'sqlite'
    ? `exists (select 1 from json_each(articles.tag_list) where value = ${name})`
    : `exists (select 1 from json_array_elements_text(articles.tag_list::json) as listed (name) where listed.name = ${name})`;
}

/**
 * What an insert or delete on each table moves; `row` is NEW for an insert, OLD for a delete. With `guarded`, a tag
 * link rewrites its article's tag_list only when the list does not already say what the link says. `counts` says
 * which rows the counts lists show (an author's articles, a user's favorites, a tag's articles, all articles) count:
 * - `all`: every row, as before migration 0013;
 * - `listed` (0013 to 0016): published articles, and links whose article_listed_at says their article is one;
 * - `flagged` (0017 on): published articles, and links whose article_counted says so (a link of a scheduled article
 *   carries its key, but is counted only once the publication is recorded).
 */
export type CountedRows = 'all' | 'listed' | 'flagged';

const derivedFrom = (
  dialect: Dialect,
  guarded: boolean,
  counts: CountedRows,
): ReadonlyArray<{ table: string; moves: (row: string, delta: string) => string[] }> => {
  const articleListed = (row: string) => (counts === 'all' ? '' : ` and ${row}.status = 'published' and ${row}.withheld = 0`);
  const linkCondition = {
    all: () => '',
    listed: (row: string) => ` and ${row}.article_listed_at is not null`,
    flagged: (row: string) => ` and ${row}.article_counted = 1`,
  };
  const linkListed = linkCondition[counts];
  return [
    {
      table: 'articles',
      moves: (row, delta) => [
        `update users set articles_count = articles_count ${delta} where id = ${row}.author_id${articleListed(row)}`,
        `update article_totals set articles = articles ${delta} where stripe = ${row}.id % ${ARTICLE_TOTAL_STRIPES}${articleListed(row)}`,
      ],
    },
    {
      table: 'favorites',
      moves: (row, delta) => [
        `update articles set favorites_count = favorites_count ${delta} where id = ${row}.article_id`,
        `update users set favorites_count = favorites_count ${delta} where id = ${row}.user_id${linkListed(row)}`,
      ],
    },
    {
      table: 'article_tags',
      moves: (row, delta) => [
        `update tags set article_count = article_count ${delta} where id = ${row}.tag_id${linkListed(row)}`,
        `update articles set tag_list = ${tagListOf(dialect, `${row}.article_id`)} where id = ${row}.article_id${
          guarded ? ` and ${delta.startsWith('+') ? 'not ' : ''}${inTagList(dialect, row)}` : ''
        }`,
      ],
    },
  ];
};

/**
 * Every count a list shows (an author's articles, a user's favorites, an article's favorites, a tag's articles,
 * all articles) and each article's tag names are kept by the database in the statement that inserts or deletes
 * the rows behind them, cascades included: no write path can forget one, and a change made by hand in SQL keeps
 * them exact too. Bulk loaders (the seed command, the bench) drop them, write the values with the rows, and
 * create them again.
 */
export function countTriggers(
  dialect: Dialect,
  { guarded = true, counts = 'flagged', only }: { guarded?: boolean; counts?: CountedRows; only?: string } = {},
) {
  const tables = derivedFrom(dialect, guarded, counts).filter(({ table }) => only === undefined || table === only);
  if (dialect === 'sqlite') {
    const events = [
      ['insert', 'new', '+ 1'],
      ['delete', 'old', '- 1'],
    ] as const;
    const triggers = tables.flatMap(({ table, moves }) =>
      events.map(([event, row, delta]) => ({
        name: `${table}_count_${event}`,
        create: `create trigger ${table}_count_${event} after ${event} on ${table} begin ${moves(row, delta).join('; ')}; end`,
      })),
    );
    return { create: triggers.map((t) => t.create), drop: triggers.map((t) => `drop trigger ${t.name}`) };
  }
  return {
    create: tables.flatMap(({ table, moves }) => [
      `create function ${table}_count() returns trigger language plpgsql as $$ begin
        if tg_op = 'INSERT' then ${moves('new', '+ 1').join('; ')}; else ${moves('old', '- 1').join('; ')}; end if;
        return null;
      end $$`,
      `create trigger ${table}_count after insert or delete on ${table} for each row execute function ${table}_count()`,
    ]),
    drop: tables.flatMap(({ table }) => [`drop trigger ${table}_count on ${table}`, `drop function ${table}_count()`]),
  };
}

/**
 * Replaces the hand-kept counts and the shared `counters` table of 0003/0004 (every write moved one row there,
 * so every write of every instance queued on it) with triggers and a striped total of all articles, and keeps each
 * article's tag names on its row.
 */
export function countsByTriggers(dialect: Dialect) {
  // As this migration made them; 0012 guards the tag links' list updates.
  const triggers = countTriggers(dialect, { guarded: false, counts: 'all' });
  const accountVersionTriggers = accountVersion(dialect);
  return {
    async up(db: Kysely<unknown>) {
      await accountVersionTriggers.down(db);
      await db.schema.dropTable('counters').execute();
      await db.schema
        .createTable('article_totals')
        .addColumn('stripe', 'integer', (c) => c.primaryKey())
        .addColumn('articles', 'bigint', (c) => c.notNull())
        .execute();
      // The whole total starts on one stripe; only the sum means anything.
      await sql`insert into article_totals (stripe, articles) select 0, count(*) from articles`.execute(db);
      for (let stripe = 1; stripe < ARTICLE_TOTAL_STRIPES; stripe++) {
        await sql`insert into article_totals (stripe, articles) values (${stripe}, 0)`.execute(db);
      }
      for (const statement of triggers.create) await sql.raw(statement).execute(db);
      await db.schema
        .alterTable('articles')
        .addColumn('tag_list', 'text', (c) => c.notNull().defaultTo('[]'))
        .execute();
      await sql.raw(`update articles set tag_list = ${tagListOf(dialect, 'articles.id')}`).execute(db);
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable('articles').dropColumn('tag_list').execute();
      for (const statement of triggers.drop) await sql.raw(statement).execute(db);
      await db.schema.dropTable('article_totals').execute();
      await createCounters(db);
      await accountVersionTriggers.up(db);
    },
  };
}
