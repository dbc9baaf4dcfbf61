import { type ColumnDefinitionBuilder, type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';

/** The event types this migration adds, after the sixteen of 0009 and 0013: bits 16 to 21 (catalogue.ts keeps the order). */
const NEW_EVENT_TYPES = ['article.hidden', 'article.unhidden', 'comment.hidden', 'comment.unhidden', 'user.suspended', 'user.unsuspended'];
const FIRST_NEW_BIT = 16;

/**
 * users.screened_count: how many accounts a user's reads must leave out (blocks either way, the user's own mutes),
 * kept beside the signed-in row every request reads already, so that a viewer who blocks and mutes nobody, nearly
 * everyone, pays nothing for the rule. Each row moves only the two users it names: no row shared by all writers.
 */
function screenTriggers(dialect: Dialect): { create: string[]; drop: string[] } {
  const tables = [
    { table: 'blocks', screening: ['blocker_id', 'blocked_id'] },
    { table: 'mutes', screening: ['muter_id'] },
  ];
  const moves = (row: 'new' | 'old', by: string, columns: string[]) =>
    columns.map((column) => `update users set screened_count = screened_count ${by} 1 where id = ${row}.${column}`);
  if (dialect === 'sqlite') {
    return {
      create: tables.flatMap(({ table, screening }) => [
        `create trigger ${table}_screen_added after insert on ${table} begin ${moves('new', '+', screening).join('; ')}; end`,
        `create trigger ${table}_screen_removed after delete on ${table} begin ${moves('old', '-', screening).join('; ')}; end`,
      ]),
      drop: tables.flatMap(({ table }) => [`drop trigger ${table}_screen_added`, `drop trigger ${table}_screen_removed`]),
    };
  }
  return {
    create: tables.flatMap(({ table, screening }) => [
      `create function ${table}_screen() returns trigger language plpgsql as $$ begin
         if tg_op = 'INSERT' then ${moves('new', '+', screening).join('; ')};
         else ${moves('old', '-', screening).join('; ')}; end if;
         return null;
       end $$`,
      `create trigger ${table}_screen after insert or delete on ${table} for each row execute function ${table}_screen()`,
    ]),
    drop: tables.flatMap(({ table }) => [`drop trigger ${table}_screen on ${table}`, `drop function ${table}_screen()`]),
  };
}

/**
 * The audit log is append-only for every statement, the app's own included: a trigger refuses UPDATE and DELETE
 * (and on PostgreSQL TRUNCATE). Only dropping the table, which no route or statement of the app does, removes it.
 */
function appendOnlyTriggers(dialect: Dialect): { create: string[]; drop: string[] } {
  const refusal = 'the audit log is append-only';
  if (dialect === 'sqlite') {
    return {
      create: ['update', 'delete'].map(
        (operation) =>
          `create trigger audit_log_no_${operation} before ${operation} on audit_log begin select raise(abort, '${refusal}'); end`,
      ),
      drop: ['drop trigger audit_log_no_update', 'drop trigger audit_log_no_delete'],
    };
  }
  return {
    create: [
      `create function audit_log_append_only() returns trigger language plpgsql as $$ begin
         raise exception '${refusal}' using errcode = 'restrict_violation';
       end $$`,
      `create trigger audit_log_no_change before update or delete on audit_log for each row execute function audit_log_append_only()`,
      `create trigger audit_log_no_truncate before truncate on audit_log for each statement execute function audit_log_append_only()`,
    ],
    drop: [
      'drop trigger audit_log_no_truncate on audit_log',
      'drop trigger audit_log_no_change on audit_log',
      'drop function audit_log_append_only()',
    ],
  };
}

/**
 * Moderation, as the contract's section of that name has it: roles, suspension, hidden articles and comments,
 * blocks and mutes, reports, the decisions told to the users they concern, and the audit log.
 *
 * A hidden article is withheld (bit 2 of articles.withheld; bit 1 is an account leaving), so the one visibility rule
 * of migration 0013 (listed_at null while withheld) takes it out of every list and count through the same triggers.
 */
export function moderation(dialect: Dialect) {
  const screens = screenTriggers(dialect);
  const appendOnly = appendOnlyTriggers(dialect);
  const run = async (db: Kysely<unknown>, statements: string[]) => {
    for (const statement of statements) await sql.raw(statement).execute(db);
  };
  const identity = (c: ColumnDefinitionBuilder) =>
    dialect === 'postgres' ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement();
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('users')
        .addColumn('role', 'text', (c) => c.notNull().defaultTo('user').check(sql`role in ('user', 'moderator', 'admin')`))
        .execute();
      // Suspended while suspended_at is set and suspended_until (null: until lifted) has not passed: it lifts itself.
      for (const column of ['suspended_at', 'suspended_until']) {
        await db.schema.alterTable('users').addColumn(column, 'bigint').execute();
      }
      await db.schema.alterTable('users').addColumn('suspension_reason', 'text').execute();
      await db.schema
        .alterTable('users')
        .addColumn('screened_count', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema.alterTable('articles').addColumn('hidden_reason', 'text').execute();
      await db.schema.alterTable('comments').addColumn('hidden_reason', 'text').execute();
      // Who hid it: an article's author may undo their own hide, never a moderator's. No foreign key, here and on
      // notifications.decision_id: SQLite cannot drop a column that has one, and a stale id harms nothing (a decision
      // goes only with its subject, whose notifications go with them).
      await db.schema.alterTable('comments').addColumn('hidden_by', 'integer').execute();

      for (const [table, subject, object] of [
        ['blocks', 'blocker_id', 'blocked_id'],
        ['mutes', 'muter_id', 'muted_id'],
      ] as const) {
        await db.schema
          .createTable(table)
          .addColumn(subject, 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
          .addColumn(object, 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint(`${table}_pk`, [subject, object])
          .execute();
        await db.schema
          .createIndex(`${table}_${object.replace('_id', '')}_idx`)
          .on(table)
          .columns([object, subject])
          .execute();
      }

      await db.schema
        .createTable('reports')
        .addColumn('id', 'integer', identity)
        .addColumn('reporter_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('target_type', 'text', (c) => c.notNull().check(sql`target_type in ('article', 'comment', 'profile')`))
        // The account the report is about: the reported profile, or the author of the reported article or comment.
        .addColumn('subject_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('article_id', 'integer', (c) => c.references('articles.id').onDelete('cascade'))
        .addColumn('comment_id', 'integer', (c) => c.references('comments.id').onDelete('cascade'))
        // `article:12`, `comment:7`, `profile:3`: one key for the one-open-report-per-target rule and the queue's grouping.
        .addColumn('target_key', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull().check(sql`reason in ('spam', 'harassment', 'illegal', 'other', 'appeal')`))
        .addColumn('message', 'text')
        .addColumn('status', 'text', (c) => c.notNull().defaultTo('open').check(sql`status in ('open', 'resolved', 'dismissed')`))
        // An appeal is a queue entry about a decision.
        .addColumn('decision_id', 'integer')
        .addColumn('decided_by', 'integer', (c) => c.references('users.id').onDelete('set null'))
        .addColumn('decision_note', 'text')
        .addColumn('decided_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('reports_open_once_idx')
        .on('reports')
        .columns(['reporter_id', 'target_key'])
        .unique()
        .where(sql.ref('status'), '=', 'open')
        .execute();
      await db.schema.createIndex('reports_queue_idx').on('reports').columns(['status', 'id']).execute();
      await db.schema.createIndex('reports_target_idx').on('reports').columns(['target_key', 'status']).execute();
      await db.schema.createIndex('reports_reporter_idx').on('reports').columns(['reporter_id', 'id']).execute();
      await db.schema.createIndex('reports_subject_idx').on('reports').column('subject_id').execute();

      await db.schema
        .createTable('moderation_decisions')
        .addColumn('id', 'integer', identity)
        // Whom the decision is about and who is told: the hidden content's author, the suspended account, the reporter.
        .addColumn('subject_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('article_id', 'integer', (c) => c.references('articles.id').onDelete('set null'))
        .addColumn('comment_id', 'integer', (c) => c.references('comments.id').onDelete('set null'))
        .addColumn('report_id', 'integer', (c) => c.references('reports.id').onDelete('set null'))
        .addColumn('reason', 'text')
        .addColumn('until', 'bigint')
        .addColumn('appealed_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('moderation_decisions_subject_idx').on('moderation_decisions').columns(['subject_id', 'id']).execute();
      await db.schema.alterTable('notifications').addColumn('decision_id', 'integer').execute();
      await db.schema.createIndex('notifications_decision_idx').on('notifications').column('decision_id').execute();

      await db.schema
        .createTable('audit_log')
        .addColumn('id', 'integer', identity)
        // Ids without foreign keys: an entry outlives the accounts and content it names (a purge cannot take it),
        // and holds no name or text of theirs, only ids, so a purged account leaves nothing readable behind.
        .addColumn('actor_id', 'integer')
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('target_type', 'text', (c) => c.notNull())
        .addColumn('target_id', 'integer')
        .addColumn('reason', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      // The public lists walk this index newest first; with the author in it, a viewer who blocks or mutes someone
      // has each walked entry checked against them from the index alone, instead of reading every walked article.
      await db.schema.dropIndex('articles_listed_idx').execute();
      await db.schema.createIndex('articles_listed_idx').on('articles').columns(['listed_at', 'id', 'author_id']).execute();
      await run(db, [...screens.create, ...appendOnly.create]);
      for (const [position, name] of NEW_EVENT_TYPES.entries()) {
        await sql`insert into event_types (name, bit, notifies, takes_back)
          values (${name}, ${2 ** (FIRST_NEW_BIT + position)}, null, null)`.execute(db);
      }
    },
    async down(db: Kysely<unknown>) {
      await sql`delete from event_types where bit >= ${2 ** FIRST_NEW_BIT}`.execute(db);
      await run(db, [...appendOnly.drop, ...screens.drop]);
      // Hidden articles come back with the columns that hid them.
      await sql`update articles set withheld = withheld & 1,
        listed_at = case when withheld & 1 = 0 and status = 'published' then published_at
          when withheld & 1 = 0 and status = 'scheduled' then publish_at end
        where withheld & 2 <> 0`.execute(db);
      await db.schema.dropTable('audit_log').execute();
      await db.schema.dropIndex('articles_listed_idx').execute();
      await db.schema.createIndex('articles_listed_idx').on('articles').columns(['listed_at', 'id']).execute();
      await db.schema.dropIndex('notifications_decision_idx').execute();
      await db.schema.alterTable('notifications').dropColumn('decision_id').execute();
      for (const table of ['moderation_decisions', 'reports', 'mutes', 'blocks']) await db.schema.dropTable(table).execute();
      await db.schema.alterTable('comments').dropColumn('hidden_by').execute();
      await db.schema.alterTable('comments').dropColumn('hidden_reason').execute();
      await db.schema.alterTable('articles').dropColumn('hidden_reason').execute();
      for (const column of ['screened_count', 'suspension_reason', 'suspended_until', 'suspended_at', 'role']) {
        await db.schema.alterTable('users').dropColumn(column).execute();
      }
    },
  };
}
