import type { Executor } from '../../db/index.js';

export type AuditAction =
  | 'role.changed'
  | 'article.hidden'
  | 'article.unhidden'
  | 'comment.hidden'
  | 'comment.unhidden'
  | 'user.suspended'
  | 'user.unsuspended'
  | 'report.resolved'
  | 'report.dismissed'
  | 'decision.appealed'
  | 'article.published'
  | 'user.purged';

export interface AuditEntry {
  /** null for the system: the scheduler's publications, the purges. */
  actorId: number | null;
  action: AuditAction;
  targetType: 'article' | 'comment' | 'profile' | 'report' | 'decision';
  targetId: number;
  reason?: string | null;
}

/** One line in the append-only audit log, in the caller's transaction: the record stands or falls with the act. */
export async function appendAudit(trx: Executor, entry: AuditEntry, now: number): Promise<void> {
  await trx
    .insertInto('audit_log')
    .values({
      actor_id: entry.actorId,
      action: entry.action,
      target_type: entry.targetType,
      target_id: entry.targetId,
      reason: entry.reason ?? null,
      created_at: now,
    })
    .execute();
}

export interface Decision {
  /** Whom it is about and who is told. */
  subjectId: number;
  /** Who decided: the notification's actor. */
  actorId: number;
  action: AuditAction;
  articleId?: number;
  commentId?: number;
  reportId?: number;
  reason: string | null;
  until?: number | null;
}

/**
 * A decision about a user's account or content: kept for GET /api/user/moderation (and its appeal), told to the
 * user as a `moderation` notification with the reason, and written to the audit log, all in the caller's
 * transaction. Returns the decision's id.
 */
export async function recordDecision(
  trx: Executor,
  decision: Decision,
  auditTarget: Pick<AuditEntry, 'targetType' | 'targetId'>,
  now: number,
) {
  const { id } = await trx
    .insertInto('moderation_decisions')
    .values({
      subject_id: decision.subjectId,
      action: decision.action,
      article_id: decision.articleId ?? null,
      comment_id: decision.commentId ?? null,
      report_id: decision.reportId ?? null,
      reason: decision.reason,
      until: decision.until ?? null,
      created_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await trx
    .insertInto('notifications')
    .values({
      recipient_id: decision.subjectId,
      kind: 'moderation',
      actor_id: decision.actorId,
      article_id: decision.articleId ?? null,
      comment_id: decision.commentId ?? null,
      endpoint_id: null,
      event_id: null,
      decision_id: id,
      created_at: now,
    })
    .execute();
  await appendAudit(trx, { actorId: decision.actorId, action: decision.action, ...auditTarget, reason: decision.reason }, now);
  return Number(id);
}
