import { createHash } from 'node:crypto';
import type { Executor } from '../../db/index.js';
import { alreadyTaken, HttpError, LOOKALIKE_USERNAME } from '../../errors.js';
import { identityKey, usernameKey, usernameSkeleton } from '../../identity.js';

/** How long a purged account's username and email stay out of reach of every other account. */
export const RESERVATION_MS = 30 * 86_400_000;

type Reserved = 'username' | 'lookalike' | 'email';

/**
 * What a reservation keeps of a name or an address: a digest, so that the purged account's username and email are
 * recognised when someone asks for them again without being stored anywhere once it is gone.
 */
const digestOf = (kind: Reserved, key: string) => createHash('sha256').update(`${kind}:${key}`).digest('hex');

/** The digests of the identities given, keyed as the unique keys of users compare them. */
function digests(identity: { username?: string; email?: string }): Array<{ kind: Reserved; digest: string }> {
  const { username, email } = identity;
  return [
    ...(username === undefined
      ? []
      : [
          { kind: 'username' as const, digest: digestOf('username', usernameKey(username)) },
          { kind: 'lookalike' as const, digest: digestOf('lookalike', usernameSkeleton(username)) },
        ]),
    ...(email === undefined ? [] : [{ kind: 'email' as const, digest: digestOf('email', identityKey(email)) }]),
  ];
}

/** Keeps the purged account's username, its lookalikes and its email from every other account until `until`. */
export async function reserveIdentity(trx: Executor, identity: { username: string; email: string }, until: number): Promise<void> {
  await trx
    .insertInto('reserved_identities')
    .values(digests(identity).map(({ digest }) => ({ digest, until })))
    .onConflict((oc) => oc.column('digest').doUpdateSet((eb) => ({ until: eb.ref('excluded.until') })))
    .execute();
}

/**
 * Throws the contract's 409 when a username or email the account now has (`changed`: what a registration or an update
 * wrote) is reserved. Called in the write's transaction after the row is written, so no purge can slip in between:
 * the purged account held these keys under the unique indexes of users until the purge's transaction committed, and
 * that transaction writes the reservation. A write racing it waits on those indexes (PostgreSQL) or on the one
 * writer (SQLite) and then, reading afresh, sees the reservation.
 */
export async function refuseReserved(trx: Executor, changed: { username?: string; email?: string }, now: number): Promise<void> {
  const wanted = digests(changed);
  if (wanted.length === 0) return;
  const rows = await trx
    .selectFrom('reserved_identities')
    .select('digest')
    .where(
      'digest',
      'in',
      wanted.map(({ digest }) => digest),
    )
    .where('until', '>', now)
    .execute();
  const reserved = new Set(wanted.filter(({ digest }) => rows.some((row) => row.digest === digest)).map(({ kind }) => kind));
  if (reserved.size === 0) return;
  // Every field at once, as for any other refusal; the name itself before its lookalike.
  throw new HttpError(409, {
    ...(reserved.has('lookalike') && { username: [LOOKALIKE_USERNAME] }),
    ...(reserved.has('username') && alreadyTaken('username').errors),
    ...(reserved.has('email') && alreadyTaken('email').errors),
  });
}

/** Drops up to `limit` reservations that have run out; how many. */
export async function dropExpiredReservations(db: Executor, now: number, limit: number): Promise<number> {
  const result = await db
    .deleteFrom('reserved_identities')
    .where('digest', 'in', (eb) =>
      eb.selectFrom('reserved_identities as old').select('old.digest').where('old.until', '<=', now).orderBy('old.until').limit(limit),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
