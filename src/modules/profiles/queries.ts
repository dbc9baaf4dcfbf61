import type { ExpressionBuilder, SqlBool } from 'kysely';
import { moveCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { precompiled } from '../../db/precompiled.js';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { identityKey } from '../../identity.js';

export interface ProfileRow {
  id: number;
  username: string;
  bio: string | null;
  image: string | null;
  following: number | boolean;
}

/**
 * "Does the viewer follow this user?" for the `users` row of the outer query (the author of an article or
 * comment), correlated per row so a whole page learns it in the same query. Anonymous viewers follow nobody.
 */
export function followedByViewer(eb: ExpressionBuilder<Database, 'users'>, viewerId: number | null) {
  if (viewerId === null) return eb.lit(false).$castTo<SqlBool>();
  return eb.exists(
    eb
      .selectFrom('follows')
      .select(eb.lit(1).as('one'))
      .where('follows.follower_id', '=', viewerId)
      .whereRef('follows.followed_id', '=', 'users.id'),
  );
}

export function toProfile(row: { username: string; bio: string | null; image: string | null; following: unknown }) {
  // SQLite answers EXISTS with 0/1, PostgreSQL with a boolean.
  return { username: row.username, bio: row.bio, image: row.image, following: Boolean(row.following) };
}

const profileSeenBy = (viewer: number | null) =>
  precompiled((db) =>
    db
      .selectFrom('users')
      .select((eb) => ['users.id', 'users.username', 'users.bio', 'users.image', followedByViewer(eb, viewer).as('following')])
      .where('users.username_key', '=', ''),
  );
const anonymousProfile = profileSeenBy(null);
// The viewer's id is a placeholder here, the first parameter, before the username's key.
const viewersProfile = profileSeenBy(0);

/** Compiled once: a profile is one indexed lookup, cheaper than building its query each time. */
export async function findProfile(db: Executor, username: string, viewerId: number | null): Promise<ProfileRow | undefined> {
  const key = identityKey(username);
  const [row] = viewerId === null ? await anonymousProfile(db, [key]) : await viewersProfile(db, [viewerId, key]);
  return row;
}

/**
 * Idempotent: the composite key turns a repeated follow into nothing. A real change alters feeds, so the
 * content version moves with it, and only then, as with favorites.
 */
export function follow(db: Executor, followerId: number, followedId: number, now: number): Promise<void> {
  return inTransaction(db, async (trx) => {
    const { numInsertedOrUpdatedRows } = await trx
      .insertInto('follows')
      .values({ follower_id: followerId, followed_id: followedId, created_at: now })
      .onConflict((oc) => oc.columns(['follower_id', 'followed_id']).doNothing())
      .executeTakeFirst();
    if (numInsertedOrUpdatedRows) await moveCounter(trx, 'content_version', 1);
  });
}

export function unfollow(db: Executor, followerId: number, followedId: number): Promise<void> {
  return inTransaction(db, async (trx) => {
    const { numDeletedRows } = await trx
      .deleteFrom('follows')
      .where('follower_id', '=', followerId)
      .where('followed_id', '=', followedId)
      .executeTakeFirst();
    if (numDeletedRows) await moveCounter(trx, 'content_version', 1);
  });
}
