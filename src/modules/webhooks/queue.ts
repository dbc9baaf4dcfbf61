import { sql } from 'kysely';
import type { WebhookConfig } from '../../config.js';
import { type DatabaseHandle, dialectOf, type Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import type { EventType } from '../events/catalogue.js';
import type { DeliveryResult } from './send.js';

/** A delivery this process has leased, with all it takes to send it. */
export interface ClaimedDelivery {
  id: number;
  endpointId: number;
  /** Attempts made before this one; the lease keeps anyone else from adding to them meanwhile. */
  attempts: number;
  createdAt: number;
  url: string;
  secret: string;
  event: { id: number; type: EventType; createdAt: number; data: string };
}

const MAX_WAIT_MS = 60 * 60 * 1000;

/**
 * Written into the SQL rather than bound: a partial index (status = 'pending', migration 0010) serves a query only
 * when the query's own condition is that very constant, on SQLite and in PostgreSQL's generic plans alike.
 */
const PENDING = sql.lit<'pending'>('pending');

/**
 * The deliveries that may go out now: pending, due, to an enabled endpoint, and first in that endpoint's queue
 * (by event id), with nothing of the endpoint's on its way or waiting for a retry. So an endpoint receives one
 * delivery at a time, in event order, whichever process sends it; a failing one holds back those behind it until it
 * succeeds or is given up. A replay of an older event goes ahead of newer ones still queued.
 */
function dueDeliveries(db: Executor, now: number) {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as w', 'w.id', 'd.endpoint_id')
    .where('w.enabled', '=', 1)
    .where('d.status', '=', PENDING)
    .where('d.next_attempt_at', '<=', now)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('webhook_deliveries as other')
            .select('other.id')
            .whereRef('other.endpoint_id', '=', 'd.endpoint_id')
            .where('other.status', '=', PENDING)
            .whereRef('other.id', '<>', 'd.id')
            .where((eb) =>
              eb.or([
                eb(eb.refTuple('other.event_id', 'other.id'), '<', eb.refTuple('d.event_id', 'd.id')),
                // Leased by a sender, or waiting out its backoff.
                eb('other.next_attempt_at', '>', now),
              ]),
            ),
        ),
      ),
    );
}

/**
 * Deliveries of one owner on their way at once, across every process on the database. One owner's slow receivers
 * then hold at most this many of the senders' slots, and a second one lets the owner's other endpoints go on while
 * one of them is slow (each endpoint takes one at a time anyway).
 */
export const OWNER_SHARE = 2;

/**
 * Held by a claim on PostgreSQL for its transaction: claims from every process run one at a time, each seeing the
 * leases of the one before, so OWNER_SHARE holds across instances and no delivery is claimed twice. A claim is a few
 * short statements, four times a second per process; SQLite's one writer serialises them already.
 */
const CLAIM_LOCK = 0x5745_4248;

/**
 * The due deliveries ranked for a fair share of the slots. `turn` numbers each owner's due deliveries (oldest first);
 * `load`, that plus the deliveries the owner already has on their way, is how many they would have once this one is
 * claimed. Round-robin: every owner's next delivery before anyone's one after, then the owner whose endpoints were
 * claimed longest ago, then the delivery due longest. So a receiver that holds every request for the whole time-out
 * costs its owner their share, and anyone else waits at most for the next free slot.
 */
function fairShare(db: Executor, now: number, limit: number) {
  // Per owner, once each (subqueries per due row cost a 50,000-delivery backlog 55 ms more): the leases, off their
  // partial index (migration 0020), and when their endpoints were last claimed.
  const onTheirWay = db
    .selectFrom('webhook_deliveries as leased')
    .innerJoin('webhook_endpoints as lw', 'lw.id', 'leased.endpoint_id')
    .select(['lw.owner_id', (eb) => eb.fn.countAll<number>().as('count')])
    .where('leased.leased_until', '>', now)
    .where('leased.status', '=', PENDING)
    .groupBy('lw.owner_id');
  const servedAt = db
    .selectFrom('webhook_endpoints as cw')
    .select(['cw.owner_id', (eb) => eb.fn.max('cw.last_claimed_at').as('at')])
    .where('cw.last_claimed_at', 'is not', null)
    .groupBy('cw.owner_id');
  const ranked = dueDeliveries(db, now)
    .leftJoin(onTheirWay.as('busy'), 'busy.owner_id', 'w.owner_id')
    .leftJoin(servedAt.as('served'), 'served.owner_id', 'w.owner_id')
    .select((eb) => [
      'd.id',
      'd.endpoint_id',
      'd.next_attempt_at',
      sql<number>`row_number() over (partition by ${sql.ref('w.owner_id')} order by ${sql.ref('d.next_attempt_at')}, ${sql.ref('d.id')})`.as(
        'turn',
      ),
      eb.fn.coalesce('busy.count', sql.lit(0)).as('on_their_way'),
      eb.fn.coalesce('served.at', sql.lit(0)).as('served_at'),
    ]);
  const load = sql`ranked.turn + ranked.on_their_way`;
  return db
    .selectFrom(ranked.as('ranked'))
    .select(['ranked.id', 'ranked.endpoint_id'])
    .where(load, '<=', OWNER_SHARE)
    .orderBy(load)
    .orderBy('ranked.served_at')
    .orderBy('ranked.next_attempt_at')
    .limit(limit);
}

/**
 * Leases up to `limit` due deliveries to this process, at most OWNER_SHARE of each owner's on their way at once:
 * their next_attempt_at moves `leaseMs` ahead, so no other sender takes them while they are on their way, and they
 * come due again should this process die. An idle poll is one read on the read connections, not a write.
 */
export async function claimDue(database: DatabaseHandle, now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const anything = await dueDeliveries(database.db, now).select('d.id').limit(1).executeTakeFirst();
  if (anything === undefined) return [];
  const db = database.writer;
  const leasedUntil = now + leaseMs;
  const claimed = await inTransaction(db, async (trx) => {
    if (dialectOf(trx) === 'postgres') {
      await sql`select pg_advisory_xact_lock(${sql.lit(CLAIM_LOCK)})`.execute(trx);
      // A large backlog's estimated cost starts JIT compilation: 230 ms of compiling for a ranking that runs in 50.
      await sql`set local jit = off`.execute(trx);
    }
    const chosen = await fairShare(trx, now, limit).execute();
    if (chosen.length === 0) return [];
    // Endpoints before their deliveries, the order in which deleting an endpoint locks them: no deadlock between the two.
    await trx
      .updateTable('webhook_endpoints')
      .set({ last_claimed_at: now })
      .where(
        'id',
        'in',
        chosen.map(({ endpoint_id }) => endpoint_id),
      )
      .execute();
    return (
      trx
        .updateTable('webhook_deliveries')
        .set({ next_attempt_at: leasedUntil, leased_until: leasedUntil })
        .where(
          'id',
          'in',
          chosen.map(({ id }) => id),
        )
        // Checked again on the row itself: a delivery given up or deleted since the ranking read it stays as it is.
        .where('status', '=', PENDING)
        .where('next_attempt_at', '<=', now)
        .returning('id')
        .execute()
    );
  });
  if (claimed.length === 0) return [];
  const rows = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as w', 'w.id', 'd.endpoint_id')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select([
      'd.id',
      'd.endpoint_id',
      'd.attempts',
      'd.created_at',
      'w.url',
      'w.secret',
      'e.id as event_id',
      'e.type',
      'e.data',
      'e.created_at as event_created_at',
    ])
    .where(
      'd.id',
      'in',
      claimed.map(({ id }) => id),
    )
    .execute();
  return rows.map((row) => ({
    id: row.id,
    endpointId: row.endpoint_id,
    attempts: row.attempts,
    createdAt: row.created_at,
    url: row.url,
    secret: row.secret,
    event: { id: row.event_id, type: row.type as EventType, createdAt: row.event_created_at, data: row.data },
  }));
}

/** Exponential from the base, capped, with ±20 % jitter so that endpoints failing together do not retry together. */
export const retryDelay = (attempts: number, baseMs: number): number =>
  Math.min(baseMs * 2 ** (attempts - 1), MAX_WAIT_MS) * (0.8 + 0.4 * Math.random());

export type AttemptOutcome = 'delivered' | 'retrying' | 'failed';

const describeFailure = (result: DeliveryResult) => result.error ?? `status ${result.status}`;

/**
 * Stores one attempt's outcome: delivered; or failed for good at once when its host is refused; or failed, to be
 * tried again after a backoff; or, once it has failed for longer than the retry window, given up, with its endpoint
 * disabled, the rest of its queue given up too and the owner notified, all or nothing. A delivery is updated only while still pending and an endpoint disabled only while
 * enabled: a delivery whose endpoint was deleted meanwhile has gone with it, and nothing is recorded twice.
 */
export function recordAttempt(
  db: Executor,
  delivery: ClaimedDelivery,
  result: DeliveryResult,
  now: number,
  policy: Pick<WebhookConfig, 'retryForMs' | 'backoffBaseMs'>,
): Promise<AttemptOutcome> {
  return inTransaction(db, async (trx) => {
    const attempts = delivery.attempts + 1;
    const outcome = {
      attempts,
      leased_until: null,
      last_status: result.status,
      last_latency_ms: result.latencyMs,
      last_error: result.ok ? null : describeFailure(result),
    };
    const update = trx.updateTable('webhook_deliveries').where('id', '=', delivery.id).where('status', '=', PENDING);
    const fail = () => update.set({ ...outcome, status: 'failed', finished_at: now }).execute();
    if (result.ok) {
      await update.set({ ...outcome, status: 'delivered', finished_at: now }).execute();
      return 'delivered';
    }
    if (result.refused) {
      // The URL was fine when saved, but its host is not allowed now (or its name is gone): another try would end the
      // same way. The endpoint stays enabled: once its DNS is fixed, the next event goes out.
      await fail();
      return 'failed';
    }
    if (now - delivery.createdAt < policy.retryForMs) {
      await update.set({ ...outcome, next_attempt_at: now + Math.round(retryDelay(attempts, policy.backoffBaseMs)) }).execute();
      return 'retrying';
    }
    await fail();
    const disabled = await trx
      .updateTable('webhook_endpoints')
      .set({ enabled: 0, disabled_reason: `deliveries failed for longer than the retry window; the last one: ${describeFailure(result)}` })
      .where('id', '=', delivery.endpointId)
      .where('enabled', '=', 1)
      .returning('owner_id')
      .executeTakeFirst();
    if (disabled === undefined) return 'failed';
    // The rest of its queue would only fail the same way; once the endpoint works again, its owner can replay them.
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', finished_at: now, last_error: 'endpoint disabled' })
      .where('endpoint_id', '=', delivery.endpointId)
      .where('status', '=', PENDING)
      .execute();
    await trx
      .insertInto('notifications')
      .values({
        recipient_id: disabled.owner_id,
        kind: 'webhook-disabled',
        actor_id: disabled.owner_id,
        endpoint_id: delivery.endpointId,
        article_id: null,
        comment_id: null,
        event_id: null,
        created_at: now,
      })
      .execute();
    return 'failed';
  });
}
