import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Dialect } from '../index.js';
import { ARTICLE_TOTAL_STRIPES, countTriggers } from './0005_counts_by_triggers.js';
import { listingTriggers as listingTriggersOf0013 } from './0013_article_lifecycle.js';

const LINK_TABLES = ['article_tags', 'favorites'] as const;

/** 1 while the article is counted in the counts lists show: its publication recorded, not withheld. */
const counted = (row: string) => `(case when ${row}.status = 'published' and ${row}.withheld = 0 then 1 else 0 end)`;

/**
 * The links follow their article: its listed_at as their key (so a scheduled article's links carry its publishAt,
 * and a tag's or a favoriter's list finds it from that millisecond on, from the link index alone) and whether it
 * is counted. The counts move with the article's own counted state, and through the links' update triggers, each
 * tag's articles and each favoriter's favorites.
 */
function listingTriggers(dialect: Dialect): { create: string[]; drop: string[] } {
  const countedMoved = `${counted('new')} <> ${counted('old')}`;
  const articleMoves = LINK_TABLES.map(
    (table) => `update ${table} set article_listed_at = new.listed_at, article_counted = ${counted('new')} where article_id = new.id`,
  ).concat([
    `update users set articles_count = articles_count + ${counted('new')} - ${counted('old')} where id = new.author_id and ${countedMoved}`,
    `update article_totals set articles = articles + ${counted('new')} - ${counted('old')}
       where stripe = new.id % ${ARTICLE_TOTAL_STRIPES} and ${countedMoved}`,
  ]);
  const listingMoved = (distinct: string) => `old.listed_at ${distinct} new.listed_at or ${countedMoved}`;
  const delta = `(case when new.article_counted = 1 then 1 else -1 end)`;
  const linkMoves = [
    { table: 'article_tags', move: `update tags set article_count = article_count + ${delta} where id = new.tag_id` },
    { table: 'favorites', move: `update users set favorites_count = favorites_count + ${delta} where id = new.user_id` },
  ];
  // listed_at moves alone when a schedule changes; status and withheld move the count.
  const articleColumns = 'listed_at, status, withheld';
  if (dialect === 'sqlite') {
    return {
      create: [
        `create trigger articles_listing after update of ${articleColumns} on articles
           when ${listingMoved('is not')} begin ${articleMoves.join('; ')}; end`,
        ...linkMoves.map(
          ({ table, move }) =>
            `create trigger ${table}_listing after update of article_counted on ${table}
               when old.article_counted <> new.article_counted begin ${move}; end`,
        ),
      ],
      drop: ['drop trigger articles_listing', ...linkMoves.map(({ table }) => `drop trigger ${table}_listing`)],
    };
  }
  return {
    create: [
      `create function articles_listing() returns trigger language plpgsql as $$ begin
         if ${listingMoved('is distinct from')} then ${articleMoves.join('; ')}; end if;
         return null;
       end $$`,
      `create trigger articles_listing after update of ${articleColumns} on articles
         for each row execute function articles_listing()`,
      ...linkMoves.flatMap(({ table, move }) => [
        `create function ${table}_listing() returns trigger language plpgsql as $$ begin
           if old.article_counted <> new.article_counted then ${move}; end if;
           return null;
         end $$`,
        `create trigger ${table}_listing after update of article_counted on ${table}
           for each row execute function ${table}_listing()`,
      ]),
    ],
    drop: [
      'drop trigger articles_listing on articles',
      'drop function articles_listing()',
      ...linkMoves.flatMap(({ table }) => [`drop trigger ${table}_listing on ${table}`, `drop function ${table}_listing()`]),
    ],
  };
}

/**
 * A scheduled article's links carry its publishAt as their key, and a new `article_counted` says whether the
 * counts count them. Before this, the links took the key only once a scheduler recorded the publication, so every
 * list read through a link table (a tag, a user's favorites, the tag feeds) had to add the scheduled articles due
 * but unrecorded in a second branch of its statement: that union cost a tag page 3.5 times the plain index walk.
 * Now the link index alone answers `article_listed_at <= now`, the rule every other list asks of listed_at.
 *
 * Adding the column with its default is a change of the table's definition on both databases, not a rewrite; only
 * the links of articles that are not counted (drafts, scheduled, unpublished, withheld: few) are written.
 */
export function scheduledLinkKeys(dialect: Dialect): Migration {
  const oldCounts = countTriggers(dialect, { counts: 'listed' });
  const newCounts = countTriggers(dialect, { counts: 'flagged' });
  const oldListing = listingTriggersOf0013(dialect);
  const newListing = listingTriggers(dialect);
  const run = async (db: Kysely<unknown>, statements: string[]) => {
    for (const statement of statements) await sql.raw(statement).execute(db);
  };
  return {
    async up(db: Kysely<unknown>) {
      await run(db, [...oldListing.drop, ...oldCounts.drop]);
      for (const table of LINK_TABLES) {
        await db.schema
          .alterTable(table)
          .addColumn('article_counted', 'integer', (c) => c.notNull().defaultTo(1))
          .execute();
        await sql`update ${sql.table(table)} set article_counted = 0,
            article_listed_at = (select listed_at from articles where articles.id = ${sql.ref(`${table}.article_id`)})
          where article_id in (select id from articles where status <> 'published' or withheld <> 0)`.execute(db);
      }
      await run(db, [...newCounts.create, ...newListing.create]);
    },
    async down(db: Kysely<unknown>) {
      await run(db, [...newListing.drop, ...newCounts.drop]);
      for (const table of LINK_TABLES) {
        await sql`update ${sql.table(table)} set article_listed_at = null where article_counted = 0`.execute(db);
        await db.schema.alterTable(table).dropColumn('article_counted').execute();
      }
      await run(db, [...oldCounts.create, ...oldListing.create]);
    },
  };
}
