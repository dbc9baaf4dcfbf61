import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';

/**
 * The outbox (events), what it fans out to inside the same transaction (notifications, webhook deliveries), and the
 * webhook endpoints that decide that fan-out.
 */
export function events(dialect: Dialect) {
  const postgres = dialect === 'postgres';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('events')
        .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
          postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
        )
        // PostgreSQL hands out ids before commit, so ids alone do not say in which order events became visible: a
        // reader that moved past id 11 could later see id 10 commit. Ordered by (tx, id) and read only below the
        // oldest transaction still running, the stream never skips one (events/stream.ts). SQLite commits one
        // writer at a time, so there id order is commit order and tx stays 0.
        .addColumn('tx', 'bigint', (c) => c.notNull().defaultTo(postgres ? sql`(pg_current_xact_id()::text::bigint)` : 0))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('actor_id', 'integer')
        // The user whose content or account the event concerns: who is notified, whose webhooks receive it.
        .addColumn('owner_id', 'integer')
        .addColumn('article_id', 'integer')
        // 0 or 1 on both databases: better-sqlite3 binds no booleans.
        .addColumn('public', 'integer', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('events_stream_idx').on('events').columns(['tx', 'id']).execute();
      // Retention walks the oldest events; the CLI and webhook replays list one owner's.
      await db.schema.createIndex('events_created_idx').on('events').columns(['created_at', 'id']).execute();
      await db.schema.createIndex('events_owner_idx').on('events').columns(['owner_id', 'id']).execute();

      await db.schema
        .createTable('webhook_endpoints')
        .addColumn('id', 'integer', (c) => (postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement()))
        .addColumn('owner_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('url', 'text', (c) => c.notNull())
        // One bit per event type (events/catalogue.ts): the fan-out matches with one AND, on both databases.
        .addColumn('event_mask', 'integer', (c) => c.notNull())
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('disabled_reason', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('webhook_endpoints_owner_idx').on('webhook_endpoints').columns(['owner_id', 'id']).execute();

      await db.schema
        .createTable('notifications')
        .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
          postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
        )
        .addColumn('recipient_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('actor_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        // Set for the notice that an endpoint was disabled after failing for a day.
        .addColumn('endpoint_id', 'integer', (c) => c.references('webhook_endpoints.id').onDelete('cascade'))
        // Deleting the article or the comment deletes what told its author about it: no entry points at nothing.
        .addColumn('article_id', 'integer', (c) => c.references('articles.id').onDelete('cascade'))
        .addColumn('comment_id', 'integer', (c) => c.references('comments.id').onDelete('cascade'))
        .addColumn('event_id', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('notifications_recipient_idx').on('notifications').columns(['recipient_id', 'id']).execute();
      // Unfollow and unfavorite take back the notification the follow or favorite made.
      await db.schema.createIndex('notifications_actor_idx').on('notifications').columns(['actor_id', 'kind', 'recipient_id']).execute();
      await db.schema.createIndex('notifications_article_idx').on('notifications').column('article_id').execute();
      await db.schema.createIndex('notifications_comment_idx').on('notifications').column('comment_id').execute();

      await db.schema
        .createTable('notification_marks')
        .addColumn('user_id', 'integer', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
        .addColumn('read_up_to', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('webhook_deliveries')
        .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
          postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
        )
        .addColumn('endpoint_id', 'integer', (c) => c.notNull().references('webhook_endpoints.id').onDelete('cascade'))
        .addColumn('event_id', 'bigint', (c) => c.notNull().references('events.id').onDelete('cascade'))
        // pending, delivered or failed (gave up).
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
        .addColumn('last_status', 'integer')
        .addColumn('last_latency_ms', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      // The worker claims what is due; the log lists one endpoint's newest; retention keeps events still owed.
      await db.schema.createIndex('webhook_deliveries_due_idx').on('webhook_deliveries').columns(['status', 'next_attempt_at']).execute();
      await db.schema.createIndex('webhook_deliveries_endpoint_idx').on('webhook_deliveries').columns(['endpoint_id', 'id']).execute();
      await db.schema.createIndex('webhook_deliveries_event_idx').on('webhook_deliveries').column('event_id').execute();
    },

    async down(db: Kysely<unknown>) {
      for (const table of ['webhook_deliveries', 'notification_marks', 'notifications', 'webhook_endpoints', 'events']) {
        await db.schema.dropTable(table).execute();
      }
    },
  };
}
