import type { FastifyInstance } from 'fastify';
import type { RetentionConfig } from '../../config.js';
import type { Executor } from '../../db/index.js';
import { schedulePurge } from '../../db/purge.js';

const PURGE_INTERVAL_MS = 10 * 60 * 1000;
const PURGE_BATCH = 1000;

/**
 * Deletes up to `limit` events created before `before` that no pending webhook delivery still needs, with their
 * delivery log (by cascade). Oldest first off the created_at index; the subquery because neither database shares a
 * `DELETE ... LIMIT`.
 */
export async function purgeOldEvents(db: Executor, before: number, limit: number): Promise<number> {
  const result = await db
    .deleteFrom('events')
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('events as old')
        .select('old.id')
        .where('old.created_at', '<', before)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('webhook_deliveries')
                .select('webhook_deliveries.id')
                .whereRef('webhook_deliveries.event_id', '=', 'old.id')
                .where('webhook_deliveries.status', '=', 'pending'),
            ),
          ),
        )
        .orderBy('old.created_at')
        .limit(limit),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * Deletes up to `limit` notifications created before `before` that their recipient has read, walking each reader's
 * range of the (recipient, id) index up to their mark: unread ones are never touched, however old.
 */
export async function purgeReadNotifications(db: Executor, before: number, limit: number): Promise<number> {
  const result = await db
    .deleteFrom('notifications')
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('notification_marks')
        .innerJoin('notifications as old', (join) =>
          join.onRef('old.recipient_id', '=', 'notification_marks.user_id').onRef('old.id', '<=', 'notification_marks.read_up_to'),
        )
        .select('old.id')
        .where('old.created_at', '<', before)
        .limit(limit),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export function scheduleRetention(app: FastifyInstance, retention: RetentionConfig): void {
  schedulePurge(app, 'old events', PURGE_INTERVAL_MS, PURGE_BATCH, (limit) =>
    purgeOldEvents(app.db, Date.now() - retention.eventsMs, limit),
  );
  schedulePurge(app, 'read notifications', PURGE_INTERVAL_MS, PURGE_BATCH, (limit) =>
    purgeReadNotifications(app.db, Date.now() - retention.readNotificationsMs, limit),
  );
}
