import { moveCounter, readCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { perDatabase } from '../../db/per-database.js';
import { precompiled } from '../../db/precompiled.js';
import { inTransaction } from '../../db/transaction.js';
import { VersionedCache } from '../../db/versioned-cache.js';
import { identityKey } from '../../identity.js';

const ACCOUNT_COLUMNS = ['id', 'username', 'email', 'bio', 'image', 'token_version', 'kept_session'] as const;

export interface Account {
  id: number;
  username: string;
  email: string;
  bio: string | null;
  image: string | null;
  token_version: number;
  kept_session: string | null;
}

const accountById = precompiled((db) => db.selectFrom('users').select(ACCOUNT_COLUMNS).where('id', '=', 0));

/** Signed-in users remembered at once; each is a few hundred bytes. */
const CACHED_ACCOUNTS = 10_000;

/** `null` for an id with no user: that too stays true until `account_version` moves (a deletion moves it). */
const accountCaches = perDatabase((db) => new VersionedCache<Readonly<Account> | null>(db, CACHED_ACCOUNTS));

/**
 * Behind every signed-in request: the account, valid while `account_version` stands still (triggers move it with
 * every insert, delete and change of these columns, also made by hand in SQL). The version is read as concurrent
 * requests share it (see readCounter), so a burst of signed-in requests costs one lookup, not one per request.
 */
export async function findSignedInAccount(db: Executor, id: number): Promise<Readonly<Account> | undefined> {
  const account = await accountCaches(db).get(await readCounter(db, 'account_version'), String(id), async () => {
    const [row] = await accountById(db, [id]);
    // Shared by every request of this user until the version moves.
    return row === undefined ? null : Object.freeze(row);
  });
  return account ?? undefined;
}

export function findLoginByEmail(db: Executor, email: string) {
  return db
    .selectFrom('users')
    .select([...ACCOUNT_COLUMNS, 'password_hash'])
    .where('email_key', '=', identityKey(email))
    .executeTakeFirst();
}

export function insertAccount(
  db: Executor,
  user: { username: string; email: string; passwordHash: string },
  now: number,
): Promise<Account> {
  const username = user.username.normalize('NFC');
  return db
    .insertInto('users')
    .values({
      username,
      username_key: identityKey(username),
      email: user.email,
      email_key: identityKey(user.email),
      password_hash: user.passwordHash,
      bio: null,
      image: null,
      created_at: now,
      updated_at: now,
    })
    .returning(ACCOUNT_COLUMNS)
    .executeTakeFirstOrThrow();
}

export interface AccountChanges {
  username?: string;
  email?: string;
  bio?: string | null;
  image?: string | null;
  /** A new password revokes every other session; `keptSession` names the one that stays. */
  password?: { hash: string; keptSession: string };
}

/** A change of what article lists show of the author (name, bio, image) moves the content version with it. */
export function updateAccount(db: Executor, id: number, changes: AccountChanges, now: number): Promise<Account> {
  const username = changes.username?.normalize('NFC');
  return inTransaction(db, async (trx) => {
    const account = await trx
      .updateTable('users')
      .set((eb) => ({
        updated_at: now,
        ...(username !== undefined && { username, username_key: identityKey(username) }),
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
    if (username !== undefined || changes.bio !== undefined || changes.image !== undefined) {
      await moveCounter(trx, 'content_version', 1);
    }
    return account;
  });
}
