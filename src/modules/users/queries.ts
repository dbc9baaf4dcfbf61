import type { ExpressionBuilder } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import { preparedQuery } from '../../db/prepared.js';
import type { Database, Role } from '../../db/schema.js';
import { inTransaction, type Precondition } from '../../db/transaction.js';
import { identityKey, usernameKey, usernameSkeleton } from '../../identity.js';
import { appendEvent } from '../events/outbox.js';
import { toProfile } from '../profiles/queries.js';
import { refuseReserved } from './reservations.js';

const ACCOUNT_COLUMNS = [
  'id',
  'username',
  'email',
  'bio',
  'image',
  'token_version',
  'kept_session',
  'purge_at',
  'role',
  'suspended_at',
  'suspended_until',
  'screened_count',
] as const;

export interface Account {
  id: number;
  username: string;
  email: string;
  bio: string | null;
  image: string | null;
  token_version: number;
  kept_session: string | null;
  /** Set while the account is leaving (leaving.ts). */
  purge_at: number | null;
  role: Role;
  /** Suspended while set and suspended_until (null: until lifted) has not passed (modules/moderation). */
  suspended_at: number | null;
  suspended_until: number | null;
  /** How many accounts this user's reads leave out (blocks, mutes): zero for nearly everyone, who skip the rule. */
  screened_count: number;
}

/**
 * An account whose purge time has come is gone, whether or not a purge pass has run yet (leaving.ts): no sign-in,
 * no token, from that millisecond on.
 */
const notPurged = (now: number) => (eb: ExpressionBuilder<Database, 'users'>) =>
  eb.or([eb('users.purge_at', 'is', null), eb('users.purge_at', '>', now)]);

/**
 * Behind every signed-in request: one primary-key lookup, so a revoked session or a deleted user is refused at once,
 * with the accounts the user's reads leave out (profiles/blocks.ts) when there are any.
 */
const signedInAccount = preparedQuery((db: Executor, values: { id: number; now: number }) =>
  db
    .selectFrom('users')
    .select(ACCOUNT_COLUMNS)
    .select('screened_ids as screened')
    .where('id', '=', values.id)
    .where(notPurged(values.now)),
);

export function findSignedInAccount(db: Executor, id: number) {
  return signedInAccount.executeTakeFirst(db, { id, now: Date.now() });
}

export function findLoginByEmail(db: Executor, email: string) {
  return db
    .selectFrom('users')
    .select([...ACCOUNT_COLUMNS, 'password_hash'])
    .where('email_key', '=', identityKey(email))
    .where(notPurged(Date.now()))
    .executeTakeFirst();
}

export async function findPasswordHash(db: Executor, id: number): Promise<string | undefined> {
  return (await db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst())?.password_hash;
}

/** Whether an account has this username, a leaving one included (it keeps its name until it is purged). */
export async function isUsernameTaken(db: Executor, username: string): Promise<boolean> {
  const holder = await db.selectFrom('users').select('id').where('username_key', '=', usernameKey(username)).executeTakeFirst();
  return holder !== undefined;
}

/**
 * Writes the account and its `type` event in one transaction, refusing (409) a username or email in `claimed` that a
 * purged account still reserves.
 */
function withAccountEvent(
  db: Executor,
  type: 'user.registered' | 'user.updated',
  claimed: { username?: string; email?: string },
  write: (trx: Executor) => Promise<Account>,
  now: number,
) {
  return inTransaction(db, async (trx) => {
    const account = await write(trx);
    await refuseReserved(trx, claimed, now);
    // The account as others see it, never the email.
    const data = { profile: toProfile({ ...account, following: false }) };
    await appendEvent(trx, { type, actorId: account.id, ownerId: account.id, data }, now);
    return account;
  });
}

export function insertAccount(
  db: Executor,
  user: { username: string; email: string; passwordHash: string },
  now: number,
): Promise<Account> {
  const { username } = user;
  return withAccountEvent(
    db,
    'user.registered',
    user,
    (trx) =>
      trx
        .insertInto('users')
        .values({
          username,
          username_key: usernameKey(username),
          username_skeleton: usernameSkeleton(username),
          email: user.email,
          email_key: identityKey(user.email),
          password_hash: user.passwordHash,
          bio: null,
          image: null,
          created_at: now,
          updated_at: now,
          profile_updated_at: now,
        })
        .returning(ACCOUNT_COLUMNS)
        .executeTakeFirstOrThrow(),
    now,
  );
}

export interface AccountChanges {
  username?: string;
  email?: string;
  bio?: string | null;
  image?: string | null;
  /** A new password revokes every other session; `keptSession` names the one that stays. */
  password?: { hash: string; keptSession: string };
}

/** What the profile shows of an account, the columns its Last-Modified follows. */
const SHOWN_COLUMNS = ['username', 'bio', 'image'] as const;

/**
 * The profile's time: now when the update gives a shown column a value it did not have, else unchanged. Judged
 * against the row, not by which fields were sent: a settings form sends the name, bio and image with every email or
 * password change, and a stranger must not learn when those happened.
 */
function profileTime(eb: ExpressionBuilder<Database, 'users'>, changes: AccountChanges, now: number) {
  const moved = SHOWN_COLUMNS.flatMap((column) => (changes[column] === undefined ? [] : [eb(column, 'is distinct from', changes[column])]));
  if (moved.length === 0) return eb.ref('profile_updated_at');
  return eb.case().when(eb.or(moved)).then(now).else(eb.ref('profile_updated_at')).end();
}

/**
 * `precondition` (If-Match) runs first in the same transaction, with the row locked on PostgreSQL (SQLite's write
 * transaction keeps every other writer out), so that nothing is written when it fails and nothing changes between
 * the check and the write.
 */
export function updateAccount(
  db: Executor,
  id: number,
  changes: AccountChanges,
  now: number,
  precondition?: Precondition,
): Promise<Account> {
  const { username } = changes;
  return withAccountEvent(
    db,
    'user.updated',
    { username, email: changes.email },
    async (trx) => {
      if (precondition !== undefined) {
        if (dialectOf(trx) === 'postgres') await trx.selectFrom('users').select('id').where('id', '=', id).forUpdate().execute();
        await precondition(trx);
      }
      return trx
        .updateTable('users')
        .set((eb) => ({
          updated_at: now,
          profile_updated_at: profileTime(eb, changes, now),
          ...(username !== undefined && {
            username,
            username_key: usernameKey(username),
            username_skeleton: usernameSkeleton(username),
          }),
          ...(changes.email !== undefined && { email: changes.email, email_key: identityKey(changes.email) }),
          ...(changes.bio !== undefined && { bio: changes.bio }),
          ...(changes.image !== undefined && { image: changes.image }),
          ...(changes.password !== undefined && {
            password_hash: changes.password.hash,
            token_version: eb('token_version', '+', 1),
            kept_session: changes.password.keptSession,
          }),
        }))
        .where('id', '=', id)
        .returning(ACCOUNT_COLUMNS)
        .executeTakeFirstOrThrow();
    },
    now,
  );
}
