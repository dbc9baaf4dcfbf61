import { sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import { pageOf } from '../../id-cursor.js';
import { toIso } from '../../schemas.js';
import { byCodePoint } from '../articles/tags.js';
import { REVISIONS_KEPT } from './schemas.js';

/** What a revision keeps of an article, tags normalised (articles/tags.ts). */
export interface RevisionContent {
  title: string;
  description: string;
  body: string;
  tagList: string[];
}

/** The same content as an articles or article_revisions row holds it. */
export interface StoredContent {
  title: string;
  description: string;
  body: string;
  tag_list: string;
}

/** Sorted on reading: lists filled in SQL (the tag-link triggers, bulk loads, the backfill of migration 0014) are in the database's order. */
const tagsOf = (tagList: string) => (JSON.parse(tagList) as string[]).sort(byCodePoint);

const sameContent = (a: RevisionContent, b: RevisionContent) =>
  a.title === b.title &&
  a.description === b.description &&
  a.body === b.body &&
  a.tagList.length === b.tagList.length &&
  a.tagList.every((tag, index) => tag === b.tagList[index]);

/**
 * Keeps `content` as the article's newest revision, in the write's transaction, and drops whatever falls past the
 * newest REVISIONS_KEPT: the delete finds the oldest one kept by a walk of REVISIONS_KEPT entries of the
 * (article_id, id) index and removes what lies below it (one row, as each write keeps one), so a write costs the same
 * whatever the article's history. The write holds the article row (locked, or new), so two writes of one article never
 * trim at once.
 */
export async function keepRevision(trx: Executor, articleId: number, content: RevisionContent, now: number): Promise<void> {
  await trx
    .insertInto('article_revisions')
    .values({
      article_id: articleId,
      title: content.title,
      description: content.description,
      body: content.body,
      tag_list: JSON.stringify(content.tagList),
      created_at: now,
    })
    .execute();
  const oldestKept = trx
    .selectFrom('article_revisions')
    .select('id')
    .where('article_id', '=', articleId)
    .orderBy('id', 'desc')
    .limit(1)
    .offset(REVISIONS_KEPT - 1);
  await trx.deleteFrom('article_revisions').where('article_id', '=', articleId).where('id', '<', oldestKept).execute();
}

/**
 * After an edit: a revision of the content it made of `before` (the row as it was inside the edit's transaction) with
 * `changes`, unless that is the same content; an edit that changed no title, description, body or tag keeps none.
 */
export function keepEditedRevision(
  trx: Executor,
  articleId: number,
  before: StoredContent,
  changes: Partial<RevisionContent>,
  now: number,
): Promise<void> {
  const previous = { title: before.title, description: before.description, body: before.body, tagList: tagsOf(before.tag_list) };
  const next = {
    title: changes.title ?? previous.title,
    description: changes.description ?? previous.description,
    body: changes.body ?? previous.body,
    tagList: changes.tagList ?? previous.tagList,
  };
  return sameContent(previous, next) ? Promise.resolve() : keepRevision(trx, articleId, next, now);
}

const toSummary = (row: Omit<StoredContent, 'body'> & { id: number; created_at: number }) => ({
  id: row.id,
  title: row.title,
  description: row.description,
  tagList: tagsOf(row.tag_list),
  createdAt: toIso(row.created_at),
});

export interface RevisionPage {
  limit: number;
  offset: number;
  /** The id of the last revision the previous page showed. */
  before?: number;
}

/**
 * A page of the article's revisions, newest first, with their number as a subquery of the same statement (the count
 * reads at most REVISIONS_KEPT index entries); only a page past the end, which has no row to carry it, asks again.
 */
export async function listRevisions(db: Executor, articleId: number, page: RevisionPage) {
  const revisions = db.selectFrom('article_revisions').where('article_id', '=', articleId);
  const total = revisions.select((eb) => eb.fn.countAll<number>().as('count'));
  const rows = await revisions
    .select(['id', 'title', 'description', 'tag_list', 'created_at', total.as('revisions_count')])
    .$if(page.before !== undefined, (query) => query.where('id', '<', page.before!))
    .orderBy('id', 'desc')
    // Written into the SQL as list.ts does: the schema bounds it, and SQLite plans a known size better.
    .limit(sql.lit(page.limit + 1))
    .offset(page.offset)
    .execute();
  const count = rows.length > 0 ? rows[0]!.revisions_count : (await total.executeTakeFirst())?.count;
  const { page: shown, nextCursor } = pageOf(rows, page.limit);
  return { revisions: shown.map(toSummary), revisionsCount: Number(count ?? 0), nextCursor };
}

/** One revision of the article with its body; undefined when the id is unknown or another article's. */
export async function getRevision(db: Executor, articleId: number, id: number) {
  const row = await revisionsWithBody(db, articleId).where('id', '=', id).executeTakeFirst();
  return row && toRevision(row);
}

/** The article's revisions with their bodies, to be narrowed and ordered by the caller. */
export const revisionsWithBody = (db: Executor, articleId: number) =>
  db
    .selectFrom('article_revisions')
    .select(['id', 'title', 'description', 'body', 'tag_list', 'created_at'])
    .where('article_id', '=', articleId);

/** A revision as GET /api/articles/:slug/revisions/:id answers it. */
export const toRevision = (row: StoredContent & { id: number; created_at: number }) => ({ ...toSummary(row), body: row.body });
