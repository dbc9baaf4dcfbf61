import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';

/**
 * The event types as this migration knows them (src/modules/events/catalogue.ts is the app's list; a test keeps the
 * two equal): the bit a webhook endpoint's mask has for each, the notification it makes, the one it takes back.
 * A later type comes with a later migration's row.
 */
const EVENT_TYPE_ROWS = [
  ['user.registered', null, null],
  ['user.updated', null, null],
  ['profile.followed', 'follow', null],
  ['profile.unfollowed', null, 'follow'],
  ['article.created', null, null],
  ['article.updated', null, null],
  ['article.deleted', null, null],
  ['article.favorited', 'favorite', null],
  ['article.unfavorited', null, 'favorite'],
  ['comment.created', 'comment', null],
  ['comment.deleted', null, null],
].map(([name, notifies, takesBack], position) => ({ name, bit: 2 ** position, notifies, takes_back: takesBack }));

/** SQLite's triggers run plain statements: each one's WHERE decides whether it does anything. */
function sqliteFanOut(): { create: string[]; drop: string[] } {
  const statements = [
    `insert into notifications (recipient_id, kind, actor_id, article_id, comment_id, event_id, created_at)
       select new.owner_id, t.notifies, new.actor_id, new.article_id, new.comment_id, new.id, new.created_at
       from event_types t where t.name = new.type and t.notifies is not null and new.actor_id <> new.owner_id`,
    `delete from notifications
       where actor_id = new.actor_id and recipient_id = new.owner_id
         and kind = (select takes_back from event_types where name = new.type)
         and (new.article_id is null or article_id = new.article_id)`,
    `insert into webhook_deliveries (endpoint_id, event_id, status, next_attempt_at, created_at)
       select e.id, new.id, 'pending', new.created_at, new.created_at
       from webhook_endpoints e join event_types t on t.name = new.type
       where e.owner_id = new.owner_id and e.enabled = 1 and (e.event_mask & t.bit) <> 0`,
  ];
  return {
    create: [`create trigger events_fan_out after insert on events begin ${statements.join('; ')}; end`],
    drop: ['drop trigger events_fan_out'],
  };
}

/**
 * What an event fans out to, done by the database in the statement that inserts the event: the owner's notification
 * (never for their own doing), the one an undo takes back, and a pending delivery per enabled endpoint of the owner
 * that wants the type. One statement per event from the app, whatever it fans out to.
 */
function fanOutTrigger(dialect: Dialect): { create: string[]; drop: string[] } {
  if (dialect === 'sqlite') return sqliteFanOut();
  // PostgreSQL reads the type's row once and runs only the statements the type needs.
  return {
    create: [
      `create function events_fan_out() returns trigger language plpgsql as $$
       declare
         kind_made text;
         kind_taken text;
         type_bit integer;
       begin
         select notifies, takes_back, bit into kind_made, kind_taken, type_bit from event_types where name = new.type;
         if kind_made is not null and new.actor_id <> new.owner_id then
           insert into notifications (recipient_id, kind, actor_id, article_id, comment_id, event_id, created_at)
             values (new.owner_id, kind_made, new.actor_id, new.article_id, new.comment_id, new.id, new.created_at);
         end if;
         if kind_taken is not null then
           delete from notifications
             where actor_id = new.actor_id and recipient_id = new.owner_id and kind = kind_taken
               and (new.article_id is null or article_id = new.article_id);
         end if;
         insert into webhook_deliveries (endpoint_id, event_id, status, next_attempt_at, created_at)
           select id, new.id, 'pending', new.created_at, new.created_at from webhook_endpoints
           where owner_id = new.owner_id and enabled = 1 and (event_mask & type_bit) <> 0;
         return null;
       end $$`,
      'create trigger events_fan_out after insert on events for each row execute function events_fan_out()',
    ],
    drop: ['drop trigger events_fan_out on events', 'drop function events_fan_out()'],
  };
}

/**
 * The outbox (events), what it fans out to inside the same transaction (notifications, webhook deliveries), and the
 * webhook endpoints that decide that fan-out.
 */
export function events(dialect: Dialect) {
  const postgres = dialect === 'postgres';
  const fanOut = fanOutTrigger(dialect);
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
        .addColumn('comment_id', 'integer')
        // 0 or 1 on both databases: better-sqlite3 binds no booleans.
        .addColumn('public', 'integer', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      // Every index is one more page each event writes and syncs. SQLite reads the stream in id order off the primary
      // key (tx is always 0 there); PostgreSQL needs (tx, id).
      if (postgres) await db.schema.createIndex('events_stream_idx').on('events').columns(['tx', 'id']).execute();
      // Retention walks the oldest events.
      await db.schema.createIndex('events_created_idx').on('events').columns(['created_at', 'id']).execute();

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
      // For the cascades; partial, so that a notice about no article or comment writes no entry there.
      for (const column of ['article_id', 'comment_id']) {
        await db.schema
          .createIndex(`notifications_${column.replace('_id', '')}_idx`)
          .on('notifications')
          .column(column)
          .where(sql.ref(column), 'is not', null)
          .execute();
      }

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

      await db.schema
        .createTable('event_types')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('bit', 'integer', (c) => c.notNull())
        .addColumn('notifies', 'text')
        .addColumn('takes_back', 'text')
        .execute();
      await db
        .insertInto('event_types' as never)
        .values(EVENT_TYPE_ROWS as never)
        .execute();
      for (const statement of fanOut.create) await sql.raw(statement).execute(db);
    },

    async down(db: Kysely<unknown>) {
      for (const statement of fanOut.drop) await sql.raw(statement).execute(db);
      for (const table of ['event_types', 'webhook_deliveries', 'notification_marks', 'notifications', 'webhook_endpoints', 'events']) {
        await db.schema.dropTable(table).execute();
      }
    },
  };
}
