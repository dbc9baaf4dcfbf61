import { type Kysely, sql } from 'kysely';
import { usernameSkeleton } from '../../identity.js';

const BATCH = 1000;

/**
 * Gives every account the skeleton of its username, in id order: an account that looks like an older one keeps its
 * name, and its skeleton gets `#<id>` so both rows fit the unique key, while new lookalikes of either are still
 * refused by the older one's skeleton. Run without the unique index, which a half-done pass would trip.
 */
export async function assignUsernameSkeletons(db: Kysely<unknown>): Promise<void> {
  const taken = new Set<string>();
  for (let after = 0; ; ) {
    const { rows: users } = await sql<{ id: number; username: string }>`
      select id, username from users where id > ${after} order by id limit ${BATCH}`.execute(db);
    if (users.length === 0) break;
    const rows = users.map(({ id, username }) => {
      const skeleton = usernameSkeleton(username);
      const kept = taken.has(skeleton) ? `${skeleton}#${id}` : skeleton;
      taken.add(skeleton);
      return sql`(cast(${id} as integer), ${kept})`;
    });
    // One statement per batch, in the form both databases take.
    await sql`with batch (id, skeleton) as (values ${sql.join(rows)})
      update users set username_skeleton = (select skeleton from batch where batch.id = users.id)
      where id in (select id from batch)`.execute(db);
    after = users.at(-1)!.id;
  }
}

/** A unique skeleton per username (identity.ts), so a new name that looks like an existing one is refused. */
export const usernameSkeletons = {
  async up(db: Kysely<unknown>) {
    await sql`alter table users add column username_skeleton text`.execute(db);
    await assignUsernameSkeletons(db);
    await sql`create unique index users_username_skeleton_unique on users (username_skeleton)`.execute(db);
  },
  async down(db: Kysely<unknown>) {
    await sql`drop index users_username_skeleton_unique`.execute(db);
    await sql`alter table users drop column username_skeleton`.execute(db);
  },
};
