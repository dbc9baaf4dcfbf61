import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';
import { ARTICLE_TOTAL_STRIPES, countTriggers } from './0005_counts_by_triggers.js';
import type { MigrationProgress } from './0011_article_search.js';

/** The key a listed (published, not withheld) article sorts by in the link tables and counts under; null otherwise. */
const linkKey = (row: string) => `(case when ${row}.status = 'published' and ${row}.withheld = 0 then ${row}.published_at end)`;
const counted = (row: string) => `(case when ${row}.status = 'published' and ${row}.withheld = 0 then 1 else 0 end)`;

/**
 * The one visibility rule, held by the database: `listed_at` is when the article is (or becomes) public, null while
 * it is a draft, unpublished or withheld. A scheduled article carries its publishAt, so a read that asks
 * `listed_at <= now` sees it from that millisecond on, whether or not the scheduler has run yet. The writers set it
 * (articles/visibility.ts has the same rule for them) and this constraint refuses any write that gets it wrong.
 * A plain column rather than a generated one: SQLite adds generated columns to a table only as virtual ones, and it
 * does not read an index over a virtual column as covering, so every list would read each walked article's row.
 */
const LISTED_AT_RULE = sql`listed_at is not distinct from (case when withheld = 0 and status = 'published' then published_at
  when withheld = 0 and status = 'scheduled' then publish_at end)`;

/**
 * When an article becomes listed or stops being listed, its tag links and favorites take its new key (lists read
 * them in that order), and the counts lists show move with it: the author's articles, the striped total, and through
 * the links' own update triggers each tag's articles and each favoriter's favorites.
 */
export function listingTriggers(dialect: Dialect): { create: string[]; drop: string[] } {
  const articleMoves = [
    `update article_tags set article_listed_at = ${linkKey('new')} where article_id = new.id`,
    `update favorites set article_listed_at = ${linkKey('new')} where article_id = new.id`,
    `update users set articles_count = articles_count + ${counted('new')} - ${counted('old')} where id = new.author_id`,
    `update article_totals set articles = articles + ${counted('new')} - ${counted('old')}
       where stripe = new.id % ${ARTICLE_TOTAL_STRIPES}`,
  ];
  const delta = `(case when new.article_listed_at is null then -1 else 1 end)`;
  const flipped = `(old.article_listed_at is null) <> (new.article_listed_at is null)`;
  const linkMoves = [
    { table: 'article_tags', move: `update tags set article_count = article_count + ${delta} where id = new.tag_id` },
    { table: 'favorites', move: `update users set favorites_count = favorites_count + ${delta} where id = new.user_id` },
  ];
  if (dialect === 'sqlite') {
    return {
      create: [
        `create trigger articles_listing after update of status, withheld, published_at on articles
           when ${linkKey('old')} is not ${linkKey('new')} begin ${articleMoves.join('; ')}; end`,
        ...linkMoves.map(
          ({ table, move }) =>
            `create trigger ${table}_listing after update of article_listed_at on ${table} when ${flipped} begin ${move}; end`,
        ),
      ],
      drop: ['drop trigger articles_listing', ...linkMoves.map(({ table }) => `drop trigger ${table}_listing`)],
    };
  }
  return {
    create: [
      `create function articles_listing() returns trigger language plpgsql as $$ begin
         if ${linkKey('old')} is distinct from ${linkKey('new')} then ${articleMoves.join('; ')}; end if;
         return null;
       end $$`,
      `create trigger articles_listing after update of status, withheld, published_at on articles
         for each row execute function articles_listing()`,
      ...linkMoves.flatMap(({ table, move }) => [
        `create function ${table}_listing() returns trigger language plpgsql as $$ begin
           if ${flipped} then ${move}; end if;
           return null;
         end $$`,
        `create trigger ${table}_listing after update of article_listed_at on ${table}
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

/** The event types this migration adds, after the eleven of 0009: bits 11 to 15 (catalogue.ts keeps the same order). */
const NEW_EVENT_TYPES = ['article.published', 'article.unpublished', 'user.deletion_requested', 'user.deletion_cancelled', 'user.deleted'];
const FIRST_NEW_BIT = 11;

const PROGRESS_FROM = 10_000;

const LINK_TABLES = [
  { table: 'article_tags', index: 'article_tags_tag', owner: 'tag_id' },
  { table: 'favorites', index: 'favorites_user', owner: 'user_id' },
] as const;

/**
 * Article states (draft, scheduled, published, unpublished) with publishAt and publishedAt; `withheld` keeps a
 * published article from everyone but its author while the author's account is being deleted. Lists go by
 * publication: the link tables carry the listed key instead of the creation time, the article indexes go by
 * listed_at, and the counts count listed articles only. Existing articles were all public: published at creation.
 */
export function articleLifecycle(dialect: Dialect, progress: MigrationProgress) {
  const postgres = dialect === 'postgres';
  const oldCounts = countTriggers(dialect, { counts: 'all' });
  const newCounts = countTriggers(dialect, { counts: 'listed' });
  const listing = listingTriggers(dialect);
  const run = async (db: Kysely<unknown>, statements: string[]) => {
    for (const statement of statements) await sql.raw(statement).execute(db);
  };
  return {
    async up(db: Kysely<unknown>) {
      const started = Date.now();
      // Steps are worth a line where they take a while: from 10,000 articles to rewrite on.
      const { rows } = await sql<{ id: number }>`select id from articles limit 1 offset ${PROGRESS_FROM - 1}`.execute(db);
      const step = (what: string) => {
        if (rows.length > 0) progress(`0013: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      };
      await db.schema
        .alterTable('articles')
        .addColumn('status', 'text', (c) =>
          c.notNull().defaultTo('published').check(sql`status in ('draft', 'scheduled', 'published', 'unpublished')`),
        )
        .execute();
      for (const column of ['publish_at', 'published_at']) {
        await db.schema.alterTable('articles').addColumn(column, 'bigint').execute();
      }
      await db.schema
        .alterTable('articles')
        .addColumn('withheld', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      // SQLite checks a constraint added with a column against the rows already there: all null, so all true.
      await db.schema
        .alterTable('articles')
        .addColumn('listed_at', 'bigint', (c) => (postgres ? c : c.check(LISTED_AT_RULE)))
        .execute();
      // One rewrite of every article.
      await sql`update articles set published_at = created_at, listed_at = created_at`.execute(db);
      step('articles published at their creation');
      if (postgres) {
        await sql`alter table articles add constraint articles_listed_at_rule check (${LISTED_AT_RULE})`.execute(db);
        step('listed_at checked');
      }
      await db.schema.dropIndex('articles_created_idx').execute();
      await db.schema.dropIndex('articles_author_created_idx').execute();
      await db.schema.createIndex('articles_listed_idx').on('articles').columns(['listed_at', 'id']).execute();
      await db.schema.createIndex('articles_author_listed_idx').on('articles').columns(['author_id', 'listed_at', 'id']).execute();
      // The author's own articles, newest change first (GET /api/user/articles).
      await db.schema.createIndex('articles_author_updated_idx').on('articles').columns(['author_id', 'updated_at', 'id']).execute();
      // What the scheduler waits for: a probe of the earliest publishAt whatever the number of articles.
      await db.schema
        .createIndex('articles_scheduled_idx')
        .on('articles')
        .columns(['publish_at', 'id'])
        .where(sql.ref('status'), '=', 'scheduled')
        .execute();
      step('article indexes');

      for (const { table, index } of LINK_TABLES) {
        if (postgres) {
          // Every article was published at creation, so the copied creation time is already the listed key.
          await sql`alter table ${sql.table(table)} alter column article_created_at drop not null,
            alter column article_created_at drop default`.execute(db);
          await sql`alter table ${sql.table(table)} rename column article_created_at to article_listed_at`.execute(db);
          await sql`alter index ${sql.raw(`${index}_created_idx`)} rename to ${sql.raw(`${index}_listed_idx`)}`.execute(db);
        } else {
          // SQLite cannot make a column nullable in place: a new column, filled from the old one.
          await db.schema.dropIndex(`${index}_created_idx`).execute();
          await db.schema.alterTable(table).addColumn('article_listed_at', 'bigint').execute();
          await sql`update ${sql.table(table)} set article_listed_at = article_created_at`.execute(db);
          await db.schema.alterTable(table).dropColumn('article_created_at').execute();
        }
        step(table);
      }
      if (!postgres) {
        for (const { table, index, owner } of LINK_TABLES) {
          await db.schema.createIndex(`${index}_listed_idx`).on(table).columns([owner, 'article_listed_at', 'article_id']).execute();
        }
        step('link indexes');
      }
      await run(db, [...oldCounts.drop, ...newCounts.create, ...listing.create]);
      for (const [position, name] of NEW_EVENT_TYPES.entries()) {
        await sql`insert into event_types (name, bit, notifies, takes_back)
          values (${name}, ${2 ** (FIRST_NEW_BIT + position)}, null, null)`.execute(db);
      }
    },
    async down(db: Kysely<unknown>) {
      await sql`delete from event_types where bit >= ${2 ** FIRST_NEW_BIT}`.execute(db);
      // Articles that were not public go with the states: the schema before this had no way to hide them. Deleted
      // while the triggers still know they were never counted.
      await sql`delete from articles where status <> 'published' or withheld <> 0`.execute(db);
      await run(db, [...listing.drop, ...newCounts.drop, ...oldCounts.create]);
      for (const { table, index, owner } of LINK_TABLES) {
        await db.schema.dropIndex(`${index}_listed_idx`).execute();
        await db.schema
          .alterTable(table)
          .addColumn('article_created_at', 'bigint', (c) => c.notNull().defaultTo(0))
          .execute();
        await sql`update ${sql.table(table)} set article_created_at =
          (select created_at from articles where articles.id = ${sql.ref(`${table}.article_id`)})`.execute(db);
        await db.schema.alterTable(table).dropColumn('article_listed_at').execute();
        await db.schema.createIndex(`${index}_created_idx`).on(table).columns([owner, 'article_created_at', 'article_id']).execute();
      }
      for (const index of ['articles_scheduled_idx', 'articles_author_updated_idx', 'articles_author_listed_idx', 'articles_listed_idx']) {
        await db.schema.dropIndex(index).execute();
      }
      await db.schema.createIndex('articles_created_idx').on('articles').columns(['created_at', 'id']).execute();
      await db.schema.createIndex('articles_author_created_idx').on('articles').columns(['author_id', 'created_at', 'id']).execute();
      for (const column of ['listed_at', 'withheld', 'published_at', 'publish_at', 'status']) {
        await db.schema.alterTable('articles').dropColumn(column).execute();
      }
    },
  };
}
