import { sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import type { ReportTarget } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { conflict, notFound, unprocessable } from '../../errors.js';
import { decodeIdCursor, pageOf } from '../../id-cursor.js';
import { toIso } from '../../schemas.js';
import { visibleTo } from '../articles/visibility.js';
import { appendAudit } from '../moderation/records.js';
import { APPEAL_KEY_PREFIX, appealKey } from './queries.js';

/** Decisions that tell a reporter how their report went: about the report, not about them, so nothing to appeal. */
const REPORT_OUTCOMES = new Set(['report.resolved', 'report.dismissed']);
/** The decisions that take something from their subject; an unhide or a lifted suspension gives it back. */
const APPEALABLE = new Set(['article.hidden', 'comment.hidden', 'user.suspended']);

/**
 * The decisions about the user, each with its article while the user may see it and its appeal, in one statement:
 * an appeal is the report keyed `decision:<id>` (queries.ts appealKey), found on the (target_key, status) index.
 * No order or page: each reader adds its own.
 */
export function decisionRows(db: Executor, userId: number) {
  return db
    .selectFrom('moderation_decisions as decision')
    .leftJoin('articles', 'articles.id', 'decision.article_id')
    .leftJoin('reports as appeal', (join) =>
      join.on((eb) => eb('appeal.target_key', '=', sql<string>`${sql.lit(APPEAL_KEY_PREFIX)} || cast(${eb.ref('decision.id')} as text)`)),
    )
    .select((eb) => [
      'decision.id',
      'decision.action',
      'decision.reason',
      'decision.until',
      'decision.created_at',
      'decision.comment_id',
      'articles.slug',
      'articles.title',
      visibleTo(eb, userId).as('visible'),
      'appeal.status as appeal_status',
      'appeal.created_at as appealed_at',
    ])
    .where('decision.subject_id', '=', userId);
}

type DecisionRow = Awaited<ReturnType<ReturnType<typeof decisionRows>['execute']>>[number];

export function toDecision(row: DecisionRow) {
  return {
    id: row.id,
    action: row.action,
    reason: row.reason,
    until: row.until === null ? null : toIso(row.until),
    createdAt: toIso(row.created_at),
    // SQLite answers a comparison with 0/1, PostgreSQL with a boolean.
    article: row.slug !== null && row.visible ? { slug: row.slug, title: row.title! } : null,
    comment: row.comment_id === null ? null : { id: row.comment_id },
    appeal: row.appeal_status === null ? null : { status: row.appeal_status, createdAt: toIso(row.appealed_at!) },
  };
}

/** `{ decisions, nextCursor }`: one statement, newest first, on the (subject_id, id) index. */
export async function listDecisions(db: Executor, userId: number, page: { limit: number; cursor?: string }) {
  const before = page.cursor === undefined ? undefined : decodeIdCursor(page.cursor, 'integer');
  const rows = await decisionRows(db, userId)
    .$if(before !== undefined, (query) => query.where('decision.id', '<', before!))
    .orderBy('decision.id', 'desc')
    .limit(sql.lit(page.limit + 1))
    .execute();
  const { page: shown, nextCursor } = pageOf(rows, page.limit);
  return { decisions: shown.map(toDecision), nextCursor };
}

/** An appeal's target: what the decision was about, its content if it had any, else the account. */
const appealTarget = (decision: { article_id: number | null; comment_id: number | null }): ReportTarget =>
  decision.comment_id !== null ? 'comment' : decision.article_id !== null ? 'article' : 'profile';

/**
 * Puts the user's appeal of their decision in the moderators' queue, once: the conditional UPDATE of appealed_at
 * lets one of two appeals at once through and answers the other 409. The appeal names the decision, not its content,
 * so the queue shows what is left of that content when a moderator reads it, and the appeal outlives it. The audit
 * line holds no text of the user's: the log outlives their account.
 */
export async function appealDecision(db: Executor, userId: number, decisionId: number, message: string, now: number) {
  const decision = await db
    .selectFrom('moderation_decisions')
    .select(['action', 'article_id', 'comment_id'])
    .where('id', '=', decisionId)
    .where('subject_id', '=', userId)
    .executeTakeFirst();
  if (decision === undefined) throw notFound('decision');
  if (REPORT_OUTCOMES.has(decision.action)) throw unprocessable('appeal', 'a decision about your report cannot be appealed');
  if (!APPEALABLE.has(decision.action)) throw unprocessable('appeal', 'a decision in your favour cannot be appealed');
  return inTransaction(db, async (trx) => {
    const taken = await trx
      .updateTable('moderation_decisions')
      .set({ appealed_at: now })
      .where('id', '=', decisionId)
      .where('appealed_at', 'is', null)
      .executeTakeFirst();
    if (taken.numUpdatedRows === 0n) throw conflict('appeal', 'already made');
    await trx
      .insertInto('reports')
      .values({
        reporter_id: userId,
        subject_id: userId,
        target_type: appealTarget(decision),
        article_id: null,
        comment_id: null,
        target_key: appealKey(decisionId),
        reason: 'appeal',
        message,
        decision_id: decisionId,
        created_at: now,
      })
      .execute();
    await appendAudit(trx, { actorId: userId, action: 'decision.appealed', targetType: 'decision', targetId: decisionId }, now);
    return { decision: toDecision(await decisionRows(trx, userId).where('decision.id', '=', decisionId).executeTakeFirstOrThrow()) };
  });
}
