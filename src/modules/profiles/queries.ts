import type { ExpressionBuilder, SqlBool } from 'kysely';
import type { Executor } from '../../db/index.js';
import { preparedQuery } from '../../db/prepared.js';
import type { Database } from '../../db/schema.js';
import { usernameKey } from '../../identity.js';
import { changeWithEvent } from '../events/outbox.js';
import { noBlockBetween, type Screening, screeningFlags } from './blocks.js';

export interface ProfileRow {
  id: number;
  username: string;
  bio: string | null;
  image: string | null;
  following: number | boolean;
  /** Whether the viewer blocks this user; whether the viewer mutes them (profiles/blocks.ts). */
  blocking: number | boolean;
  muting: number | boolean;
  /** Moves with every change of the name, bio or image, and with nothing else. */
  profile_updated_at: number;
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

/**
 * Whether the `users` row of the outer query exists for the viewer: an account that is leaving (users/leaving.ts)
 * exists for itself alone until it is purged or its owner cancels. Its profile, comments and what it did to others
 * are then the same 404 or absence as an account that never was.
 */
export function presentTo(eb: ExpressionBuilder<Database, 'users'>, viewerId: number | null) {
  const staying = eb('users.purge_at', 'is', null);
  return viewerId === null ? staying : eb.or([staying, eb('users.id', '=', viewerId)]);
}

/** The ids of the accounts leaving, the viewer's own apart: off a partial index that holds only those. */
export const leavingAccounts = (db: Executor, viewerId: number) =>
  db.selectFrom('users').select('users.id').where('users.purge_at', 'is not', null).where('users.id', '<>', viewerId);

export function toProfile(row: { username: string; bio: string | null; image: string | null; following: unknown }) {
  // SQLite answers EXISTS with 0/1, PostgreSQL with a boolean.
  return { username: row.username, bio: row.bio, image: row.image, following: Boolean(row.following) };
}

/**
 * A profile as a signed-in viewer sees it: with whether they block and mute this user. Whether this user blocks the
 * viewer is never shown: the blocked learn of a block only by being refused.
 */
export const toViewedProfile = (row: Parameters<typeof toProfile>[0] & Pick<ProfileRow, 'blocking' | 'muting'>) => ({
  ...toProfile(row),
  blocking: Boolean(row.blocking),
  muting: Boolean(row.muting),
});

/**
 * One indexed lookup, with whether the viewer follows this user, and blocks or mutes them when `screener` (the
 * viewer, profiles/blocks.ts) screens anyone; undefined for an account leaving, to all but itself.
 */
export function findProfile(
  db: Executor,
  username: string,
  viewerId: number | null,
  screener: Screening | null = null,
): Promise<ProfileRow | undefined> {
  return profileByKey.executeTakeFirst(db, {
    usernameKey: usernameKey(username),
    viewerId: viewerId ?? undefined,
    screenerId: screener?.viewerId,
  });
}

/** Built once per shape (db/prepared.ts): behind every profile page and every author filter's 404 check. */
const profileByKey = preparedQuery((db: Executor, values: { usernameKey: string; viewerId?: number; screenerId?: number }) => {
  const viewerId = values.viewerId ?? null;
  return db
    .selectFrom('users')
    .select((eb) => [
      'users.id',
      'users.username',
      'users.bio',
      'users.image',
      'users.profile_updated_at',
      followedByViewer(eb, viewerId).as('following'),
      ...screeningFlags(eb, db, values.screenerId),
    ])
    .where('users.username_key', '=', values.usernameKey)
    .where((eb) => presentTo(eb, viewerId));
});

export type FollowParty = Pick<ProfileRow, 'id' | 'username' | 'bio' | 'image'>;

/**
 * Idempotent: the composite key turns a repeated follow into nothing, and only a real change is an event (which
 * tells the followed user, or takes that notice back). A block between the two, either way, turns a follow into
 * nothing too, judged by the insert itself (profiles/blocks.ts). Returns whether anything changed.
 */
export function setFollow(db: Executor, follower: FollowParty, followed: FollowParty, following: boolean, now: number): Promise<boolean> {
  const change = (executor: Executor) =>
    following
      ? executor
          .insertInto('follows')
          .columns(['follower_id', 'followed_id', 'created_at'])
          .expression(
            // Typed, because PostgreSQL reads an untyped parameter in a SELECT as text.
            executor
              .selectNoFrom((eb) => [
                eb.cast<number>(eb.val(follower.id), 'integer').as('follower_id'),
                eb.cast<number>(eb.val(followed.id), 'integer').as('followed_id'),
                eb.cast<number>(eb.val(now), 'bigint').as('created_at'),
              ])
              .where((eb) => noBlockBetween(eb, executor, follower.id, followed.id)),
          )
          .onConflict((oc) => oc.columns(['follower_id', 'followed_id']).doNothing())
          .returning('followed_id')
      : executor
          .deleteFrom('follows')
          .where('follower_id', '=', follower.id)
          .where('followed_id', '=', followed.id)
          .returning('followed_id');
  return changeWithEvent(
    db,
    change,
    {
      type: following ? 'profile.followed' : 'profile.unfollowed',
      actorId: follower.id,
      ownerId: followed.id,
      data: { profile: toProfile({ ...followed, following: false }), follower: toProfile({ ...follower, following: false }) },
    },
    now,
  );
}
