import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Dialect } from '../index.js';

/** Rows indexed per statement while the migration fills the index: long enough to be quick, short enough to report. */
const BACKFILL_BATCH = 20_000;

export type MigrationProgress = (message: string) => void;

/** What both databases index, in this order: SQLite's bm25() takes its column weights in it. */
const COLUMNS = ['title', 'description', 'body', 'tag_list'] as const;
const columnsOf = (row: string) => COLUMNS.map((column) => `${row}.${column}`).join(', ');

/**
 * SQLite: an FTS5 index over the articles table's own text (external content, so the text is not stored twice and
 * snippet() reads it from the row). unicode61 with remove_diacritics 2 folds case and accents; triggers keep it
 * exact in the statement that changes the article, and a change of only the counts (favorites) touches nothing.
 */
const sqliteIndex = {
  create: [
    `create virtual table article_search using fts5(${COLUMNS.join(', ')},
       content='articles', content_rowid='id', tokenize='unicode61 remove_diacritics 2')`,
    `create trigger article_search_insert after insert on articles begin
       insert into article_search (rowid, ${COLUMNS.join(', ')}) values (new.id, ${columnsOf('new')});
     end`,
    `create trigger article_search_update after update of ${COLUMNS.join(', ')} on articles
       when ${COLUMNS.map((column) => `old.${column} is not new.${column}`).join(' or ')} begin
       insert into article_search (article_search, rowid, ${COLUMNS.join(', ')}) values ('delete', old.id, ${columnsOf('old')});
       insert into article_search (rowid, ${COLUMNS.join(', ')}) values (new.id, ${columnsOf('new')});
     end`,
    `create trigger article_search_delete after delete on articles begin
       insert into article_search (article_search, rowid, ${COLUMNS.join(', ')}) values ('delete', old.id, ${columnsOf('old')});
     end`,
  ],
  drop: [
    'drop trigger article_search_delete',
    'drop trigger article_search_update',
    'drop trigger article_search_insert',
    'drop table article_search',
  ],
  backfill: (after: number) =>
    sql`insert into article_search (rowid, ${sql.raw(COLUMNS.join(', '))})
        select id, ${sql.raw(COLUMNS.join(', '))} from articles where id > ${after} order by id limit ${BACKFILL_BATCH}`,
};

/**
 * PostgreSQL: a tsvector per article in a table of its own (the articles rows that every list reads stay small), with
 * a GIN index. Text is folded like SQLite's tokenizer does it: punctuation splits words (so `node.js` is `node` and
 * `js`, not one host-name token of the default parser), unaccent and lower() fold accents and case, and the `simple`
 * configuration neither stems nor drops stop words. Weights rank title over tags over description over body.
 */
function postgresIndex(unaccentSchema: string) {
  const fold = `lower(${unaccentSchema}.unaccent('${unaccentSchema}.unaccent'::regdictionary, regexp_replace($1, '[[:punct:]]+', ' ', 'g')))`;
  return {
    create: [
      // Immutable given the fixed dictionary it names, which an index-free table column may rely on.
      `create function conduit_search_fold(text) returns text language sql immutable parallel safe as $$ select ${fold} $$`,
      `create function article_search_document(title text, description text, body text, tag_list text) returns tsvector
         language sql immutable parallel safe as $$
         select setweight(to_tsvector('simple', conduit_search_fold(title)), 'A')
             || setweight(to_tsvector('simple', conduit_search_fold(tag_list)), 'B')
             || setweight(to_tsvector('simple', conduit_search_fold(description)), 'C')
             || setweight(to_tsvector('simple', conduit_search_fold(body)), 'D') $$`,
      `create table article_search (
         article_id integer primary key references articles (id) on delete cascade,
         document tsvector not null)`,
      'create index article_search_document_idx on article_search using gin (document)',
      `create function article_search_sync() returns trigger language plpgsql as $$
       begin
         insert into article_search (article_id, document)
           values (new.id, article_search_document(${columnsOf('new')}))
           on conflict (article_id) do update set document = excluded.document;
         return null;
       end $$`,
      `create trigger article_search_insert after insert on articles for each row execute function article_search_sync()`,
      `create trigger article_search_update after update of ${COLUMNS.join(', ')} on articles for each row
         when (${COLUMNS.map((column) => `old.${column} is distinct from new.${column}`).join(' or ')})
         execute function article_search_sync()`,
    ],
    drop: [
      'drop trigger article_search_update on articles',
      'drop trigger article_search_insert on articles',
      'drop function article_search_sync',
      'drop table article_search',
      'drop function article_search_document',
      'drop function conduit_search_fold',
    ],
    backfill: (after: number) =>
      sql`insert into article_search (article_id, document)
          select id, article_search_document(${sql.raw(COLUMNS.join(', '))}) from articles
          where id > ${after} order by id limit ${BACKFILL_BATCH}`,
  };
}

async function unaccentSchema(db: Kysely<unknown>): Promise<string> {
  // A trusted extension since PostgreSQL 13: the database owner may create it without being a superuser.
  await sql`create extension if not exists unaccent`.execute(db);
  const { rows } = await sql<{ schema: string }>`
    select quote_ident(nspname) as schema from pg_extension join pg_namespace on pg_namespace.oid = extnamespace
    where extname = 'unaccent'`.execute(db);
  return rows[0]!.schema;
}

/**
 * Full-text search over articles (title, description, body, tags), built for the articles already there in batches
 * of ids with a progress line per batch: at a million articles this runs for minutes, not silently.
 */
export function articleSearch(dialect: Dialect, progress: MigrationProgress): Migration {
  const index = async (db: Kysely<unknown>) => (dialect === 'sqlite' ? sqliteIndex : postgresIndex(await unaccentSchema(db)));
  return {
    async up(db: Kysely<unknown>) {
      const { create, backfill } = await index(db);
      const { rows } = await sql<{ total: number }>`select count(*) as total from articles`.execute(db);
      const total = Number(rows[0]!.total);
      // No article is written twice: on PostgreSQL the migration's transaction holds the lock creating the triggers
      // took until it commits, so writers wait and then index themselves; a SQLite file is migrated before its server
      // (or its cluster's workers) start writing to it.
      for (const statement of create) await sql.raw(statement).execute(db);
      let done = 0;
      for (let after = 0; done < total; ) {
        const { rows: batch } = await sql<{ last: number | null; indexed: number }>`
          select max(id) as last, count(*) as indexed from (
            select id from articles where id > ${after} order by id limit ${BACKFILL_BATCH}) ids`.execute(db);
        if (!batch[0]?.last) break;
        await backfill(after).execute(db);
        after = Number(batch[0].last);
        done += Number(batch[0].indexed);
        progress(`search index: ${done} of ${total} articles`);
      }
    },
    async down(db: Kysely<unknown>) {
      const { drop } = dialect === 'sqlite' ? sqliteIndex : postgresIndex('public');
      for (const statement of drop) await sql.raw(statement).execute(db);
    },
  };
}
