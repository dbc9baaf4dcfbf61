import { type ExpressionBuilder, sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import type { Database, ReportStatus, ReportTarget } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { conflict, notFound, unprocessable } from '../../errors.js';
import { decodeIdCursor, pageOf } from '../../id-cursor.js';
import { INTEGER_ID_MAX, toIso } from '../../schemas.js';
import type { ArticleRef } from '../articles/write.js';
import { shownTo } from '../comments/queries.js';
import { recordDecision } from '../moderation/records.js';
import { mayActOn } from '../moderation/roles.js';
import { followedByViewer, presentTo, toProfile } from '../profiles/queries.js';
import type { Account } from '../users/queries.js';
import { enforceReportLimits } from './limits.js';
import type { ReportReason } from './schemas.js';

/** What a report is about, as filed: the account it concerns and the content, if any. */
export interface FiledTarget {
  type: ReportTarget;
  subjectId: number;
  articleId: number | null;
  commentId: number | null;
}

/**
 * `article:12`, `comment:7`, `profile:3`; an appeal's is `decision:<id>`, so that appeals of two decisions about one
 * article are two entries, and one user's appeals never meet the one-open-report rule.
 */
const targetKey = (target: FiledTarget) => `${target.type}:${target.commentId ?? target.articleId ?? target.subjectId}`;
export const APPEAL_KEY_PREFIX = 'decision:';
export const appealKey = (decisionId: number) => `${APPEAL_KEY_PREFIX}${decisionId}`;

/**
 * A comment on the article as its comment list shows it to the viewer: not by an account leaving, and hidden ones only
 * to those who see them there. The article's own visibility is the caller's (existingArticleRef).
 */
export function findVisibleComment(db: Executor, article: Pick<ArticleRef, 'id' | 'author_id'>, commentId: number, viewerId: number) {
  return db
    .selectFrom('comments')
    .innerJoin('users', 'users.id', 'comments.author_id')
    .select(['comments.id', 'comments.author_id'])
    .where('comments.id', '=', commentId)
    .where('comments.article_id', '=', article.id)
    .where((eb) => presentTo(eb, viewerId))
    .where((eb) => shownTo(eb, article, viewerId))
    .executeTakeFirst();
}

const REPORT_COLUMNS = ['id', 'reason', 'message', 'status', 'created_at'] as const;

function toReport(row: { id: number; reason: string; message: string | null; status: ReportStatus; created_at: number }) {
  return {
    id: row.id,
    reason: row.reason as ReportReason | 'appeal',
    message: row.message,
    status: row.status,
    createdAt: toIso(row.created_at),
  };
}

/**
 * Files the report, or finds the reporter's open one on the same target (`created` false): the partial unique index
 * decides, so two requests at once make one report. Only a new report is held to the limits (limits.ts), which on
 * PostgreSQL count under a lock on the reporter's row so that a burst of filings is judged one after another (SQLite
 * runs one write transaction at a time already).
 */
export function fileReport(
  db: Executor,
  reporterId: number,
  target: FiledTarget,
  report: { reason: ReportReason; message: string | null },
  now: number,
) {
  const key = targetKey(target);
  return inTransaction(db, async (trx) => {
    if (dialectOf(trx) === 'postgres') {
      await trx.selectFrom('users').select('id').where('id', '=', reporterId).forNoKeyUpdate().execute();
    }
    // Twice at most: the open report a conflict met can be decided before it is read, and then this one is new.
    for (;;) {
      const filed = await trx
        .insertInto('reports')
        .values({
          reporter_id: reporterId,
          target_type: target.type,
          subject_id: target.subjectId,
          article_id: target.articleId,
          comment_id: target.commentId,
          target_key: key,
          reason: report.reason,
          message: report.message,
          created_at: now,
        })
        // The index's own predicate, as a literal: both databases match a partial index only on the same text.
        .onConflict((oc) => oc.columns(['reporter_id', 'target_key']).where('status', '=', sql.lit('open')).doNothing())
        .returning(REPORT_COLUMNS)
        .executeTakeFirst();
      if (filed !== undefined) {
        await enforceReportLimits(trx, reporterId, filed.id, now);
        return { created: true, report: toReport(filed) };
      }
      const open = await trx
        .selectFrom('reports')
        .select(REPORT_COLUMNS)
        .where('reporter_id', '=', reporterId)
        .where('target_key', '=', key)
        .where('status', '=', 'open')
        .executeTakeFirst();
      if (open !== undefined) return { created: false, report: toReport(open) };
    }
  });
}

/**
 * Every report with what the queue shows of it, in one statement: its reporter as the viewer sees them, the
 * reported account, the content (an appeal's through the decision it contests, whose content may be gone since) and
 * the contested decision. No filter, order or count: each reader adds its own.
 */
export function reportRows(db: Executor, viewerId: number) {
  return db
    .selectFrom('reports')
    .innerJoin('users', 'users.id', 'reports.reporter_id')
    .innerJoin('users as subject', 'subject.id', 'reports.subject_id')
    .leftJoin('moderation_decisions as contested', 'contested.id', 'reports.decision_id')
    .leftJoin('comments', (join) => join.on((eb) => eb('comments.id', '=', eb.fn.coalesce('reports.comment_id', 'contested.comment_id'))))
    .leftJoin('articles', (join) =>
      join.on((eb) => eb('articles.id', '=', eb.fn.coalesce('comments.article_id', 'reports.article_id', 'contested.article_id'))),
    )
    .select((eb) => [
      ...REPORT_COLUMNS.map((column) => `reports.${column}` as const),
      'reports.decision_note',
      'reports.decided_at',
      'users.username',
      'users.bio',
      'users.image',
      followedByViewer(eb, viewerId).as('following'),
      'subject.username as subject_username',
      'articles.id as article_id',
      'articles.slug',
      'articles.title',
      'comments.id as comment_id',
      'comments.body as comment_body',
      'contested.id as contested_id',
      'contested.action as contested_action',
      'contested.reason as contested_reason',
    ]);
}

type ReportRow = Awaited<ReturnType<ReturnType<typeof reportRows>['execute']>>[number];

/** The target as it stands now: what still exists of the content, else the account. */
function toTarget(row: ReportRow) {
  const author = row.subject_username;
  if (row.comment_id !== null) {
    return {
      type: 'comment' as const,
      id: row.comment_id,
      body: row.comment_body!,
      article: { slug: row.slug!, title: row.title! },
      author,
    };
  }
  if (row.slug !== null) return { type: 'article' as const, slug: row.slug, title: row.title!, author };
  return { type: 'profile' as const, username: author };
}

/** A report as its reporter's export shows it: the queue's entry without the reporter, who is the reader. */
export function toFiledReport(row: ReportRow) {
  return {
    ...toReport(row),
    target: toTarget(row),
    resolution: row.decided_at === null ? null : { note: row.decision_note, decidedAt: toIso(row.decided_at) },
    appeal:
      row.contested_id === null
        ? null
        : { decision: { id: row.contested_id, action: row.contested_action!, reason: row.contested_reason } },
  };
}

const toQueueEntry = (row: ReportRow & { report_count: number | null }) => ({
  ...toFiledReport(row),
  reporter: toProfile(row),
  // Typed nullable as any scalar subquery is; a count never is.
  reportCount: Number(row.report_count),
});

/** Counting stops here in the newest order, so that a page costs the same however many reports one target draws. */
const REPORT_COUNT_CAP = 1000;

/** How many reports with the row's status its target has, up to REPORT_COUNT_CAP, off the (target_key, status) index. */
const sameTargetCount = (eb: ExpressionBuilder<Database, 'reports'>) =>
  eb
    .selectFrom((inner) =>
      inner
        .selectFrom('reports as same')
        .select('same.id')
        .whereRef('same.target_key', '=', 'reports.target_key')
        .whereRef('same.status', '=', 'reports.status')
        .limit(sql.lit(REPORT_COUNT_CAP))
        .as('same_target'),
    )
    .select((inner) => inner.fn.countAll<number>().as('count'));

/** Where a most-reported page stopped: the count and id of its last entry. */
interface RankCursor {
  count: number;
  id: number;
}

const encodeRankCursor = (cursor: RankCursor) => Buffer.from(JSON.stringify([cursor.count, cursor.id])).toString('base64url');

function decodeRankCursor(text: string): RankCursor {
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(text, 'base64url').toString());
  } catch {
    fields = undefined;
  }
  const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 1;
  const isId = (value: unknown): value is number => isCount(value) && value <= INTEGER_ID_MAX;
  if (Array.isArray(fields) && fields.length === 2 && isCount(fields[0]) && isId(fields[1])) {
    const cursor = { count: fields[0], id: fields[1] };
    // Only a cursor that encodes back to itself is one this server made.
    if (encodeRankCursor(cursor) === text) return cursor;
  }
  throw unprocessable('cursor', 'is invalid');
}

/**
 * The queue as one moderator reads it: without the reports about themselves, which they may not decide and whose
 * reporters they must not learn, as no reported user does.
 */
const queueOf = (db: Executor, viewerId: number) => reportRows(db, viewerId).where('reports.subject_id', '<>', viewerId);

export interface QueuePage {
  status: ReportStatus;
  sort: 'newest' | 'most-reported';
  limit: number;
  cursor?: string;
}

/**
 * A page of the queue, in one statement whatever its size. Newest: a range of the (status, id) index, each entry
 * counting its target's reports on the (target_key, status) index up to REPORT_COUNT_CAP. Most-reported (open
 * reports only): the open reports grouped by target once per page, so a page costs what the open backlog holds, never
 * the decided history; the limits bound that backlog at REPORT_LIMITS.OPEN per reporter.
 */
export async function listQueue(db: Executor, viewerId: number, page: QueuePage) {
  if (page.sort === 'newest') {
    const before = page.cursor === undefined ? undefined : decodeIdCursor(page.cursor, 'integer');
    const rows = await queueOf(db, viewerId)
      .select((eb) => sameTargetCount(eb).as('report_count'))
      .where('reports.status', '=', page.status)
      .$if(before !== undefined, (query) => query.where('reports.id', '<', before!))
      .orderBy('reports.id', 'desc')
      .limit(sql.lit(page.limit + 1))
      .execute();
    const { page: shown, nextCursor } = pageOf(rows, page.limit);
    return { reports: shown.map(toQueueEntry), nextCursor };
  }
  if (page.status !== 'open') throw unprocessable('sort', 'most-reported orders open reports only');
  const after = page.cursor === undefined ? undefined : decodeRankCursor(page.cursor);
  const rows = await queueOf(db, viewerId)
    .innerJoin(
      (eb) =>
        eb
          .selectFrom('reports as open')
          .select((inner) => ['open.target_key', inner.fn.countAll<number>().as('count')])
          .where('open.status', '=', 'open')
          .groupBy('open.target_key')
          .as('counts'),
      (join) => join.onRef('counts.target_key', '=', 'reports.target_key'),
    )
    .select('counts.count as report_count')
    .where('reports.status', '=', 'open')
    .$if(after !== undefined, (query) =>
      query.where((eb) =>
        eb.or([eb('counts.count', '<', after!.count), eb.and([eb('counts.count', '=', after!.count), eb('reports.id', '<', after!.id)])]),
      ),
    )
    .orderBy('counts.count', 'desc')
    .orderBy('reports.id', 'desc')
    .limit(sql.lit(page.limit + 1))
    .execute();
  const shown = rows.slice(0, page.limit);
  const last = shown.at(-1);
  const nextCursor =
    rows.length > page.limit && last !== undefined ? encodeRankCursor({ count: Number(last.report_count), id: last.id }) : null;
  return { reports: shown.map(toQueueEntry), nextCursor };
}

/**
 * Decides an open report. The reporter is told the outcome, with the note as its reason, and the audit log records
 * it (recordDecision); the reported account is told nothing here, only of what a moderator then does to it. The
 * conditional UPDATE makes two moderators deciding at once one decision and one 409.
 */
export async function decideReport(
  db: Executor,
  moderator: Account,
  reportId: number,
  outcome: 'resolved' | 'dismissed',
  note: string | null,
  now: number,
) {
  const report = await db
    .selectFrom('reports')
    .innerJoin('users as subject', 'subject.id', 'reports.subject_id')
    .select(['reports.reporter_id', 'subject.id', 'subject.role'])
    .where('reports.id', '=', reportId)
    .executeTakeFirst();
  if (report === undefined) throw notFound('report');
  mayActOn(moderator, report);
  return inTransaction(db, async (trx) => {
    const decided = await trx
      .updateTable('reports')
      .set({ status: outcome, decided_by: moderator.id, decision_note: note, decided_at: now })
      .where('id', '=', reportId)
      .where('status', '=', 'open')
      .executeTakeFirst();
    if (decided.numUpdatedRows === 0n) throw conflict('report', 'already decided');
    const row = await reportRows(trx, moderator.id)
      .select((eb) => sameTargetCount(eb).as('report_count'))
      .where('reports.id', '=', reportId)
      .executeTakeFirstOrThrow();
    await recordDecision(
      trx,
      {
        subjectId: report.reporter_id,
        actorId: moderator.id,
        action: outcome === 'resolved' ? 'report.resolved' : 'report.dismissed',
        articleId: row.article_id ?? undefined,
        commentId: row.comment_id ?? undefined,
        reportId,
        reason: note,
      },
      { targetType: 'report', targetId: reportId },
      now,
    );
    return toQueueEntry(row);
  });
}
