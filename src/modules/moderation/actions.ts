import type { Executor } from '../../db/index.js';
import type { Role } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import { usernameKey } from '../../identity.js';
import { setArticleHidden } from '../articles/write.js';
import type { EventType } from '../events/catalogue.js';
import { appendEvent, mentionOf } from '../events/outbox.js';
import { type AuditAction, type AuditEntry, appendAudit, type Decision, recordDecision } from './records.js';

/** Who acts: a moderator, or an article's author on the comments under it. */
export interface Moderator {
  id: number;
  role: Role;
}

/**
 * An article as moderation finds it: by slug whatever its state (a moderator may hide a scheduled one), with its
 * author's role for the rank check.
 */
export async function findModeratedArticle(db: Executor, slug: string) {
  const article = await db
    .selectFrom('articles')
    .innerJoin('users', 'users.id', 'articles.author_id')
    .select(['articles.id', 'articles.slug', 'articles.title', 'articles.author_id', 'users.role as author_role'])
    .where('articles.slug', '=', slug)
    .executeTakeFirst();
  if (article === undefined) throw notFound('article');
  return article;
}

export type ModeratedArticle = Awaited<ReturnType<typeof findModeratedArticle>>;

/** A comment with what its rules need: its author's role, its article, and who hid it. */
export async function findModeratedComment(db: Executor, id: number, articleId?: number) {
  const comment = await db
    .selectFrom('comments')
    .innerJoin('users', 'users.id', 'comments.author_id')
    .innerJoin('articles', 'articles.id', 'comments.article_id')
    .select([
      'comments.id',
      'comments.author_id',
      'comments.hidden_by',
      'users.role as author_role',
      'articles.id as article_id',
      'articles.slug',
      'articles.title',
      'articles.author_id as article_author_id',
      'articles.listed_at',
    ])
    .where('comments.id', '=', id)
    .$if(articleId !== undefined, (query) => query.where('comments.article_id', '=', articleId!))
    .executeTakeFirst();
  if (comment === undefined) throw notFound('comment');
  return comment;
}

export type ModeratedComment = Awaited<ReturnType<typeof findModeratedComment>>;

/** An account by username, not purged, with its role and suspension. */
export async function findModeratedUser(db: Executor, username: string) {
  const user = await db
    .selectFrom('users')
    .select(['id', 'username', 'role', 'suspended_at', 'suspended_until', 'suspension_reason', 'purge_at'])
    .where('username_key', '=', usernameKey(username))
    .executeTakeFirst();
  if (user === undefined || (user.purge_at !== null && user.purge_at <= Date.now())) throw notFound('profile');
  return user;
}

export type ModeratedUser = Awaited<ReturnType<typeof findModeratedUser>>;

/**
 * A decision of one of the event types moderation announces: recorded and told to its subject (records.ts), and
 * appended to the outbox for the subject's webhooks and, where `public`, the live stream.
 */
async function decideAndAnnounce(
  trx: Executor,
  decision: Decision & { action: EventType & AuditAction },
  announcement: { target: Pick<AuditEntry, 'targetType' | 'targetId'>; data: object; public?: boolean },
  now: number,
): Promise<void> {
  await recordDecision(trx, decision, announcement.target, now);
  await appendEvent(
    trx,
    {
      type: decision.action,
      actorId: decision.actorId,
      ownerId: decision.subjectId,
      articleId: decision.articleId,
      commentId: decision.commentId,
      data: announcement.data,
      public: announcement.public,
    },
    now,
  );
}

/**
 * Hides the article (a reason) or shows it again (reason null for the record, `unhide`), with the author told, the
 * audit line and the event, in one transaction. Hiding what is hidden (or showing what is shown) changes nothing
 * and tells nobody.
 */
export function setArticleModeration(
  db: Executor,
  moderator: Moderator,
  article: ModeratedArticle,
  change: { hide: boolean; reason: string | null },
  now: number,
): Promise<void> {
  return inTransaction(db, async (trx) => {
    const moved = await setArticleHidden(trx, article, change.hide ? change.reason : null, now);
    if (moved === undefined) return;
    await decideAndAnnounce(
      trx,
      {
        action: change.hide ? 'article.hidden' : 'article.unhidden',
        subjectId: article.author_id,
        actorId: moderator.id,
        articleId: article.id,
        reason: change.reason,
      },
      {
        target: { targetType: 'article', targetId: article.id },
        data: { article: mentionOf(article) },
        // Live readers drop a hidden article they were showing, and learn of one shown again; nobody else hears of it.
        public: change.hide ? moved.wasPublic : moved.isPublic,
      },
      now,
    );
  });
}

/** The same for a comment; `moderator` is the article's author when they hide comments on their own article. */
export function setCommentModeration(
  db: Executor,
  moderator: Moderator,
  comment: ModeratedComment,
  change: { hide: boolean; reason: string | null },
  now: number,
): Promise<void> {
  return inTransaction(db, async (trx) => {
    const changed = await trx
      .updateTable('comments')
      .set({ hidden_reason: change.hide ? change.reason : null, hidden_by: change.hide ? moderator.id : null })
      .where('id', '=', comment.id)
      .where((eb) =>
        change.hide
          ? // A moderator's hide takes over one by the article's author, who then may no longer undo it.
            eb.or([
              eb('hidden_reason', 'is', null),
              ...(moderator.id === comment.article_author_id ? [] : [eb('hidden_by', '=', comment.article_author_id)]),
            ])
          : eb('hidden_reason', 'is not', null),
      )
      .executeTakeFirst();
    if (changed.numUpdatedRows === 0n) return;
    await decideAndAnnounce(
      trx,
      {
        action: change.hide ? 'comment.hidden' : 'comment.unhidden',
        subjectId: comment.author_id,
        actorId: moderator.id,
        articleId: comment.article_id,
        commentId: comment.id,
        reason: change.reason,
      },
      {
        target: { targetType: 'comment', targetId: comment.id },
        data: { article: mentionOf(comment), comment: { id: comment.id } },
        public: comment.listed_at !== null && comment.listed_at <= now,
      },
      now,
    );
  });
}

/**
 * Suspends the account (until `until`, or until lifted) or lifts its suspension, told to the account, audited and
 * announced to its own webhooks. A new suspension of a suspended account replaces the old one's reason and end.
 */
export function setSuspension(
  db: Executor,
  moderator: Moderator,
  user: ModeratedUser,
  change: { suspend: boolean; reason: string | null; until: number | null },
  now: number,
): Promise<void> {
  return inTransaction(db, async (trx) => {
    const changed = await trx
      .updateTable('users')
      .set(
        change.suspend
          ? { suspended_at: now, suspended_until: change.until, suspension_reason: change.reason }
          : { suspended_at: null, suspended_until: null, suspension_reason: null },
      )
      .where('id', '=', user.id)
      .$if(!change.suspend, (query) => query.where('suspended_at', 'is not', null))
      .executeTakeFirst();
    if (changed.numUpdatedRows === 0n) return;
    const until = change.until === null ? null : new Date(change.until).toISOString();
    await decideAndAnnounce(
      trx,
      {
        action: change.suspend ? 'user.suspended' : 'user.unsuspended',
        subjectId: user.id,
        actorId: moderator.id,
        reason: change.reason,
        until: change.until,
      },
      { target: { targetType: 'profile', targetId: user.id }, data: { profile: { username: user.username }, until } },
      now,
    );
  });
}

/** Sets the account's role, audited; the CLI makes the first admin the same way, with no actor. */
export function setRole(db: Executor, actorId: number | null, user: Pick<ModeratedUser, 'id' | 'role'>, role: Role, now: number) {
  return inTransaction(db, async (trx) => {
    const changed = await trx.updateTable('users').set({ role }).where('id', '=', user.id).where('role', '<>', role).executeTakeFirst();
    if (changed.numUpdatedRows === 0n) return;
    await appendAudit(
      trx,
      { actorId, action: 'role.changed', targetType: 'profile', targetId: user.id, reason: `${user.role} to ${role}` },
      now,
    );
  });
}
