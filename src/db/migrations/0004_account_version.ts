import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';

/** What a signed-in request reads of its user (users/queries.ts ACCOUNT_COLUMNS), apart from the id. */
const ACCOUNT_COLUMNS = 'username, email, bio, image, token_version, kept_session';

const MOVE = `update counters set value = value + 1 where name = 'account_version'`;

/**
 * `account_version` moves with every change to what a signed-in request reads of its user, so accounts can be
 * cached exactly, also across processes. Triggers move it rather than the code, so that a user deleted or a
 * session revoked by hand in SQL is refused at once, as before the cache.
 */
export function accountVersion(dialect: Dialect) {
  const triggers =
    dialect === 'sqlite'
      ? // SQLite has row triggers only; a bulk insert moves the version once per row, which costs little.
        [
          `create trigger users_account_version_insert after insert on users begin ${MOVE}; end`,
          `create trigger users_account_version_update after update of ${ACCOUNT_COLUMNS} on users begin ${MOVE}; end`,
          `create trigger users_account_version_delete after delete on users begin ${MOVE}; end`,
        ]
      : [
          `create function move_account_version() returns trigger language plpgsql as $$ begin ${MOVE}; return null; end $$`,
          `create trigger users_account_version_insert_delete after insert or delete on users for each statement execute function move_account_version()`,
          `create trigger users_account_version_update after update of ${ACCOUNT_COLUMNS} on users for each statement execute function move_account_version()`,
        ];
  const dropped =
    dialect === 'sqlite'
      ? ['users_account_version_insert', 'users_account_version_update', 'users_account_version_delete'].map(
          (name) => `drop trigger ${name}`,
        )
      : [
          'drop trigger users_account_version_insert_delete on users',
          'drop trigger users_account_version_update on users',
          'drop function move_account_version()',
        ];
  return {
    async up(db: Kysely<unknown>) {
      await sql`insert into counters (name, value) values ('account_version', 0)`.execute(db);
      for (const statement of triggers) await sql.raw(statement).execute(db);
    },
    async down(db: Kysely<unknown>) {
      for (const statement of dropped) await sql.raw(statement).execute(db);
      await sql`delete from counters where name = 'account_version'`.execute(db);
    },
  };
}
