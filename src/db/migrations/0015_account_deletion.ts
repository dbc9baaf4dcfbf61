import { type Kysely, sql } from 'kysely';

/**
 * Accounts that leave: `purge_at` is set while an account waits to be purged (users/leaving.ts), and a purged
 * account's username, lookalike skeleton and email stay reserved for a while as digests (users/reservations.ts).
 * The events indexes let a purge find what the account did or was told without reading the whole outbox.
 */
export const accountDeletion = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('users').addColumn('purge_at', 'bigint').execute();
    // Few accounts are leaving at any time: the purge pass and the readers that hide them read only those.
    await db.schema
      .createIndex('users_leaving_idx')
      .on('users')
      .columns(['purge_at', 'id'])
      .where(sql.ref('purge_at'), 'is not', null)
      .execute();

    await db.schema
      .createTable('reserved_identities')
      // SHA-256 of `<kind>:<key>`: the purged name and address are not kept, only what recognises them again.
      .addColumn('digest', 'text', (c) => c.primaryKey())
      .addColumn('until', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('reserved_identities_until_idx').on('reserved_identities').column('until').execute();

    await db.schema.createIndex('events_owner_idx').on('events').column('owner_id').execute();
    // Events where the actor is the owner are found by the index above; only the others need this one.
    await db.schema.createIndex('events_actor_idx').on('events').column('actor_id').where(sql<boolean>`actor_id <> owner_id`).execute();
  },

  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('events_actor_idx').execute();
    await db.schema.dropIndex('events_owner_idx').execute();
    await db.schema.dropTable('reserved_identities').execute();
    // Pending deletions end with the column that records them: their articles come back.
    await sql`update articles set withheld = 0 where withheld = 1`.execute(db);
    await db.schema.dropIndex('users_leaving_idx').execute();
    await db.schema.alterTable('users').dropColumn('purge_at').execute();
  },
};
