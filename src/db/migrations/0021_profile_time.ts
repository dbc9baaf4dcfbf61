import { type Kysely, sql } from 'kysely';

/**
 * users.profile_updated_at: when what a profile shows (name, bio, image) last changed, for its Last-Modified.
 * `updated_at` moves with email and password changes too, which a stranger must not be able to date. Existing
 * accounts start from `updated_at`: no later than the last change of what they show, so no copy is wrongly kept.
 */
export const profileTime = {
  async up(db: Kysely<unknown>) {
    // SQLite adds a NOT NULL column only with a default; every insert of the app sets it.
    await db.schema
      .alterTable('users')
      .addColumn('profile_updated_at', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await sql`update users set profile_updated_at = updated_at`.execute(db);
  },

  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('users').dropColumn('profile_updated_at').execute();
  },
};
