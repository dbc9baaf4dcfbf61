import type { Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { lockAuthorsArticles, setWithheld } from '../articles/write.js';
import { appendEvent } from '../events/outbox.js';
import { toProfile } from '../profiles/queries.js';
import type { Account } from './queries.js';

/**
 * Leaving, as the contract's Lifecycle section has it. `DELETE /api/user` sets users.purge_at; from then on the
 * account exists for itself alone: its profile, comments and what it did to others are hidden by the readers
 * (profiles/queries.ts presentTo), its articles are withheld (articles.withheld, so every count and list drops them
 * through the triggers), and it may write nothing but the cancellation (auth.ts). At purge_at it is gone for everyone,
 * itself included, whether or not the purge (purge.ts) has run yet; until then cancelling puts everything back.
 */

/**
 * The account's purge_at as it stands, once its row is locked on PostgreSQL with everything a change of its articles
 * moves (lockAuthorsArticles: the articles, their tags, then the users whose counts they move, this one among them,
 * in the order every other write takes them). SQLite's write transaction keeps every other writer out.
 */
async function lockedPurgeAt(trx: Executor, id: number): Promise<number | null | undefined> {
  await lockAuthorsArticles(trx, id);
  const row = await trx.selectFrom('users').select('purge_at').where('id', '=', id).executeTakeFirst();
  return row?.purge_at;
}

const eventOf = (account: Account) => ({ actorId: account.id, ownerId: account.id });

/**
 * Starts the account's deletion, purged `graceMs` from now: its articles withheld, every session but `keptSession`
 * revoked (as a password change does), and `user.deletion_requested` recorded, in one transaction. A deletion already
 * pending stays as it is: the same purge time, nothing written. Returns the purge time; undefined when the account
 * is gone (purged since its token was checked).
 */
export function requestDeletion(
  db: Executor,
  account: Account,
  keptSession: string,
  graceMs: number,
  now: number,
): Promise<number | undefined> {
  return inTransaction(db, async (trx) => {
    const pending = await lockedPurgeAt(trx, account.id);
    if (pending !== null) return pending;
    const purgeAt = now + graceMs;
    await setWithheld(trx, account.id, true);
    await trx
      .updateTable('users')
      .set((eb) => ({ purge_at: purgeAt, token_version: eb('token_version', '+', 1), kept_session: keptSession }))
      .where('id', '=', account.id)
      .execute();
    await appendEvent(
      trx,
      {
        type: 'user.deletion_requested',
        ...eventOf(account),
        // The id is what `user.deleted` will carry, so that an integrator can match the two without the purge naming anyone.
        data: { user: { id: account.id }, profile: toProfile({ ...account, following: false }), purgeAt: new Date(purgeAt).toISOString() },
      },
      now,
    );
    return purgeAt;
  });
}

/**
 * Cancels a pending deletion whose purge time has not come: articles back, `user.deletion_cancelled` recorded. True
 * when the account stays (cancelled, or nothing was pending); false when it is too late, the account being gone.
 * Sessions the request revoked stay revoked.
 */
export function cancelDeletion(db: Executor, account: Account, now: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const pending = await lockedPurgeAt(trx, account.id);
    if (pending == null) return pending === null;
    if (pending <= now) return false;
    await setWithheld(trx, account.id, false);
    await trx.updateTable('users').set({ purge_at: null }).where('id', '=', account.id).execute();
    await appendEvent(
      trx,
      {
        type: 'user.deletion_cancelled',
        ...eventOf(account),
        data: { user: { id: account.id }, profile: toProfile({ ...account, following: false }) },
      },
      now,
    );
    return true;
  });
}
