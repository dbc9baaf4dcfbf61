import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';

/**
 * users.screened_ids: the accounts a user's reads leave out (blocks either way, the user's own mutes), kept beside
 * the signed-in row every request reads, as screened_count is (0018). Gathering them at each request, a union of
 * three index walks in the statement that reads the account, cost a signed-in list 57 µs of its 470 on SQLite.
 * A change to blocks or mutes rebuilds the list of the one or two users its row names, from the tables: nothing
 * shared by all writers, and a write path (blocking) that is rare next to the reads.
 */
export function screenedIds(dialect: Dialect) {
  const screenedOf = (user: string) =>
    `select blocked_id from blocks where blocker_id = ${user} union all select blocker_id from blocks where blocked_id = ${user}
     union all select muted_id from mutes where muter_id = ${user}`;
  const list =
    dialect === 'postgres'
      ? `array(${screenedOf('users.id')})`
      : `(select json_group_array(screened.blocked_id) from (${screenedOf('users.id')}) screened)`;
  const rebuild = (row: string, columns: string[]) =>
    `update users set screened_ids = ${list} where id in (${columns.map((column) => `${row}.${column}`).join(', ')})`;
  const tables = [
    { table: 'blocks', names: ['blocker_id', 'blocked_id'] },
    { table: 'mutes', names: ['muter_id'] },
  ];
  const triggers =
    dialect === 'postgres'
      ? {
          create: tables.flatMap(({ table, names }) => [
            `create function ${table}_screened_ids() returns trigger language plpgsql as $$ begin
               if tg_op = 'INSERT' then ${rebuild('new', names)}; else ${rebuild('old', names)}; end if;
               return null;
             end $$`,
            `create trigger ${table}_screened_ids after insert or delete on ${table} for each row execute function ${table}_screened_ids()`,
          ]),
          drop: tables.flatMap(({ table }) => [`drop trigger ${table}_screened_ids on ${table}`, `drop function ${table}_screened_ids()`]),
        }
      : {
          create: tables.flatMap(({ table, names }) => [
            `create trigger ${table}_screened_ids_added after insert on ${table} begin ${rebuild('new', names)}; end`,
            `create trigger ${table}_screened_ids_removed after delete on ${table} begin ${rebuild('old', names)}; end`,
          ]),
          drop: tables.flatMap(({ table }) => [`drop trigger ${table}_screened_ids_added`, `drop trigger ${table}_screened_ids_removed`]),
        };
  const run = async (db: Kysely<unknown>, statements: string[]) => {
    for (const statement of statements) await sql.raw(statement).execute(db);
  };
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('users')
        .addColumn('screened_ids', dialect === 'postgres' ? sql`integer[]` : 'text', (c) =>
          c.notNull().defaultTo(dialect === 'postgres' ? sql`'{}'` : '[]'),
        )
        .execute();
      // Only the few accounts that screen anyone: everyone else keeps the default without a rewrite of their row.
      await sql.raw(`update users set screened_ids = ${list} where screened_count > 0`).execute(db);
      await run(db, triggers.create);
    },

    async down(db: Kysely<unknown>) {
      await run(db, triggers.drop);
      await db.schema.alterTable('users').dropColumn('screened_ids').execute();
    },
  };
}
