import { type Kysely, sql } from 'kysely';
import { assignUsernameSkeletons } from './0007_username_skeletons.js';

/**
 * Recomputes every skeleton with the confusables of Unicode 17 (src/confusables.ts) in place of those of Unicode
 * 10: a skeleton stored under the old table would not match a new lookalike written with a character that only the
 * new table maps ("gauꟖ" for "gauß"). The index goes while the rows change, since one row may take the skeleton
 * another still holds until its own turn. Reservations of purged accounts are digests and keep the skeleton they were
 * made with until they run out. Down leaves the skeletons as they are: the old table is gone, and these fit the index.
 */
export const confusablesUnicode17 = {
  async up(db: Kysely<unknown>) {
    await sql`drop index users_username_skeleton_unique`.execute(db);
    await assignUsernameSkeletons(db);
    await sql`create unique index users_username_skeleton_unique on users (username_skeleton)`.execute(db);
  },
  async down() {},
};
