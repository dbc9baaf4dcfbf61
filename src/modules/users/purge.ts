import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import { schedulePurge } from '../../db/purge.js';
import { inTransaction } from '../../db/transaction.js';
import { appendEvent } from '../events/outbox.js';
import { appendAudit } from '../moderation/records.js';
import { dropExpiredReservations, RESERVATION_MS, reserveIdentity } from './reservations.js';

/** What is left of an event that named a purged account but belongs to someone else. */
const REDACTED = JSON.stringify({ redacted: true });

/**
 * Purges the account if its purge time has come, once: of every process (and instance) that tries, only the one whose
 * DELETE of the users row deletes it goes on, in the same transaction, so the rest of the purge and its event happen
 * exactly once, and a cancellation either came first (then nothing is due) or finds the account gone. True when this
 * call purged it.
 *
 * What goes, and how:
 * - by the users row's foreign keys (every one cascades): follows both ways, the account's articles with their tag
 *   links, favorites, comments, notifications and search entries, its favorites (the favorite counts of the articles
 *   follow by trigger), its comments wherever they are, notifications to and from it, its read mark, its webhook
 *   endpoints with their deliveries. Its articles were withheld, so no list count or tag count moves.
 * - events: those about the account (it owns them) are deleted with their deliveries; those others own that it
 *   acted in (a follow, a favorite, a comment on their article) keep their place in the outbox and their owners'
 *   delivery logs, with `data` redacted and no actor.
 * - its idempotency records; what register and login keep for a replay names the account by id alone.
 * - its username, lookalike skeleton and email are reserved for RESERVATION_MS, as digests (reservations.ts).
 * Tags stay: they are names any article may use, and deleting one a concurrent write is about to link would break it.
 */
export function purgeAccount(db: Executor, id: number, now: number): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    if (dialectOf(trx) === 'postgres') {
      // Off for this transaction alone (DATABASE_STATEMENT_TIMEOUT bounds requests): the cascades are as big as the
      // account, and a purge cancelled every time would leave it never erased.
      await sql`set local statement_timeout = 0`.execute(trx);
      // The articles the cascades change, before the users row, in the order other writes lock articles then users:
      // the account's own (deleted) and those it favorited (their counts move).
      await trx
        .selectFrom('articles')
        .select('id')
        .where((eb) =>
          eb.or([eb('author_id', '=', id), eb('id', 'in', eb.selectFrom('favorites').select('article_id').where('user_id', '=', id))]),
        )
        .orderBy('id')
        .forNoKeyUpdate()
        .execute();
    }
    const gone = await trx
      .deleteFrom('users')
      .where('id', '=', id)
      .where('purge_at', '<=', now)
      .returning(['username', 'email'])
      .executeTakeFirst();
    if (gone === undefined) return false;
    await trx.deleteFrom('events').where('owner_id', '=', id).execute();
    await trx
      .updateTable('events')
      .set({ actor_id: null, data: REDACTED })
      .where('actor_id', '=', id)
      // Spelled as the partial index's condition (migration 0015), so that both databases use it.
      .whereRef('actor_id', '<>', 'owner_id')
      .execute();
    await trx.deleteFrom('idempotency_keys').where('scope', '=', `user:${id}`).execute();
    await reserveIdentity(trx, gone, now + RESERVATION_MS);
    // The id alone: integrators got it with `user.deletion_requested`, and nothing left names the account.
    await appendEvent(trx, { type: 'user.deleted', actorId: id, ownerId: id, data: { user: { id } } }, now);
    await appendAudit(trx, { actorId: null, action: 'user.purged', targetType: 'profile', targetId: id }, now);
    return true;
  });
}

/** Accounts purged per batch of the pass; a backlog takes several batches back to back. */
const PURGE_BATCH = 100;
const PURGE_INTERVAL_MS = 60 * 1000;
const RESERVATIONS_BATCH = 1000;
const RESERVATIONS_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Purges up to `limit` accounts whose time has come, oldest first off the partial index of leaving accounts; how many
 * this call purged. Any number of processes may run it at once: each account is purged by one (purgeAccount), and
 * since "due" has no lower bound, accounts that fell due while every server was down go at the next pass.
 */
export async function purgeDueAccounts(db: Executor, now: number, limit = PURGE_BATCH): Promise<number> {
  const due = await db
    .selectFrom('users')
    .select('id')
    .where('purge_at', '<=', now)
    .orderBy('purge_at')
    .orderBy('id')
    .limit(limit)
    .execute();
  let purged = 0;
  let failure: unknown;
  for (const { id } of due) {
    // One account that cannot be purged does not hold up those behind it; the pass still fails, and is logged.
    try {
      if (await purgeAccount(db, id, now)) purged++;
    } catch (error) {
      failure ??= error;
    }
  }
  if (failure !== undefined) throw failure;
  return purged;
}

/**
 * Runs the purge in this process until the app closes, every PURGE_INTERVAL_MS: an account is gone for the API at its
 * purge time already (queries.ts), so the pass only decides when its rows go. Expired reservations are dropped too.
 */
export function scheduleAccountPurge(app: FastifyInstance, db: Executor): void {
  schedulePurge(app, 'accounts past their deletion grace', PURGE_INTERVAL_MS, PURGE_BATCH, (limit) =>
    purgeDueAccounts(db, Date.now(), limit),
  );
  schedulePurge(app, 'expired username and email reservations', RESERVATIONS_INTERVAL_MS, RESERVATIONS_BATCH, (limit) =>
    dropExpiredReservations(db, Date.now(), limit),
  );
}
