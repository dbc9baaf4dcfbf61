import { type Expression, sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import { pageOf } from '../../id-cursor.js';
import { toIso } from '../../schemas.js';
import type { NotificationKind } from '../events/catalogue.js';
import { type Screening, screenedAuthors } from '../profiles/blocks.js';
import { followedByViewer, leavingAccounts, toProfile } from '../profiles/queries.js';
import { UNREAD_CAP } from './schemas.js';

/**
 * The recipient's notifications, but those about what a leaving account did (users/leaving.ts): until it is purged
 * (and they with it) or comes back, it did nothing anyone else can see. Nor, when `screener` (the recipient,
 * profiles/blocks.ts) screens anyone, what the accounts they block, mute or are blocked by did.
 */
const notificationsOf = (db: Executor, recipientId: number, screener: Screening | null) =>
  db
    .selectFrom('notifications')
    .where('notifications.recipient_id', '=', recipientId)
    .where('notifications.actor_id', 'not in', leavingAccounts(db, recipientId))
    .$if(screener !== null, (query) => query.where('notifications.actor_id', 'not in', screenedAuthors(db, screener!)));

/**
 * At most `limit` of the recipient's notifications before the cursor, newest first, each with its actor, article,
 * comment and endpoint, in one query.
 */
function selectPage(db: Executor, recipientId: number, screener: Screening | null, before: number | undefined, limit: number) {
  return (
    notificationsOf(db, recipientId, screener)
      .innerJoin('users', 'users.id', 'notifications.actor_id')
      .leftJoin('articles', 'articles.id', 'notifications.article_id')
      .leftJoin('comments', 'comments.id', 'notifications.comment_id')
      .leftJoin('webhook_endpoints', 'webhook_endpoints.id', 'notifications.endpoint_id')
      .leftJoin('moderation_decisions as decision', 'decision.id', 'notifications.decision_id')
      .select((eb) => [
        'notifications.id',
        'notifications.kind',
        'notifications.created_at',
        'users.username',
        'users.bio',
        'users.image',
        followedByViewer(eb, recipientId).as('following'),
        'articles.slug',
        'articles.title',
        'comments.id as comment_id',
        'comments.body as comment_body',
        'webhook_endpoints.id as endpoint_id',
        'webhook_endpoints.url as endpoint_url',
        'decision.id as decision_id',
        'decision.action as decision_action',
        'decision.reason as decision_reason',
        'decision.until as decision_until',
      ])
      .$if(before !== undefined, (query) => query.where('notifications.id', '<', before!))
      .orderBy('notifications.id', 'desc')
      // Written into the SQL as list.ts does for the same reason: the schema bounds it, and SQLite plans it better.
      .limit(sql.lit(limit))
  );
}

type NotificationRow = Awaited<ReturnType<ReturnType<typeof selectPage>['execute']>>[number];

/** Read once the user's mark is at or past it. */
function toNotification(row: NotificationRow, readUpTo: number) {
  return {
    id: row.id,
    kind: row.kind as NotificationKind,
    createdAt: toIso(row.created_at),
    read: row.id <= readUpTo,
    actor: toProfile(row),
    article: row.slug === null ? null : { slug: row.slug, title: row.title! },
    comment: row.comment_id === null ? null : { id: row.comment_id, body: row.comment_body! },
    webhook: row.endpoint_id === null ? null : { id: row.endpoint_id, url: row.endpoint_url! },
    moderation:
      row.decision_id === null
        ? null
        : {
            decision: Number(row.decision_id),
            action: row.decision_action!,
            reason: row.decision_reason,
            until: row.decision_until === null ? null : toIso(Number(row.decision_until)),
          },
  };
}

/** How far the user has read; 0 before they first marked anything. */
const readMark = (db: Executor, userId: number) =>
  db.fn.coalesce(db.selectFrom('notification_marks').select('read_up_to').where('user_id', '=', userId), sql.lit(0));

/**
 * The notifications past the mark, counted over at most UNREAD_CAP index entries: however many pile up unread, the
 * count costs no more.
 */
const countUnread = (db: Executor, userId: number, screener: Screening | null, readUpTo: Expression<number> | number) =>
  db
    .selectFrom(
      notificationsOf(db, userId, screener)
        .select('notifications.id')
        .where('notifications.id', '>', readUpTo)
        .limit(UNREAD_CAP)
        .as('unread'),
    )
    .select((eb) => eb.fn.countAll<number>().as('count'));

/**
 * The `{ notifications, unreadCount, nextCursor }` answer: two queries whatever the page size, the page and the
 * mark with the count past it.
 */
export async function listNotifications(
  db: Executor,
  recipientId: number,
  screener: Screening | null,
  page: { limit: number; before?: number },
) {
  const mark = readMark(db, recipientId);
  const [rows, counts] = await Promise.all([
    // One row more than the page says whether another page follows.
    selectPage(db, recipientId, screener, page.before, page.limit + 1).execute(),
    db.selectNoFrom([mark.as('read_up_to'), countUnread(db, recipientId, screener, mark).as('unread')]).executeTakeFirstOrThrow(),
  ]);
  const { page: shown, nextCursor } = pageOf(rows, page.limit);
  return {
    notifications: shown.map((row) => toNotification(row, counts.read_up_to)),
    // Typed nullable as any scalar subquery is; a count never is.
    unreadCount: Number(counts.unread),
    nextCursor,
  };
}

/**
 * Up to `limit` of the recipient's notifications before `before`, newest first, as the list shows them, those from
 * screened accounts included: what the account holds (the export), not what its lists show.
 */
export async function notificationsBefore(db: Executor, recipientId: number, before: number | undefined, limit: number) {
  const [rows, { read_up_to }] = await Promise.all([
    selectPage(db, recipientId, null, before, limit).execute(),
    db.selectNoFrom(readMark(db, recipientId).as('read_up_to')).executeTakeFirstOrThrow(),
  ]);
  return rows.map((row) => toNotification(row, read_up_to));
}

/**
 * Moves the user's mark up to `upTo` (or their newest notification), never down, with one upsert that both
 * databases read alike, and answers the unread count past the new mark. The mark stops at the user's newest
 * notification at or below `upTo`, so an id from the future cannot mark as read what has not arrived yet.
 */
export async function markRead(db: Executor, userId: number, screener: Screening | null, upTo: number | undefined) {
  const newestRead = db
    .selectFrom('notifications')
    .select((eb) => eb.fn.coalesce(eb.fn.max('id'), eb.lit(0)).as('id'))
    .where('recipient_id', '=', userId)
    .$if(upTo !== undefined, (query) => query.where('id', '<=', upTo!));
  const { read_up_to } = await db
    .insertInto('notification_marks')
    .values({ user_id: userId, read_up_to: newestRead })
    .onConflict((oc) =>
      oc.column('user_id').doUpdateSet((eb) => ({
        // CASE rather than GREATEST (PostgreSQL) or two-argument MAX (SQLite): the same text on both.
        read_up_to: eb
          .case()
          .when('excluded.read_up_to', '>', eb.ref('notification_marks.read_up_to'))
          .then(eb.ref('excluded.read_up_to'))
          .else(eb.ref('notification_marks.read_up_to'))
          .end(),
      })),
    )
    .returning('read_up_to')
    .executeTakeFirstOrThrow();
  const { count } = await countUnread(db, userId, screener, read_up_to).executeTakeFirstOrThrow();
  return { unreadCount: count };
}
