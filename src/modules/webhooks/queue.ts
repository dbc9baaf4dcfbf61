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
 * Leases up to `limit` due deliveries to this process: their next_attempt_at moves `leaseMs` ahead, so no other
 * sender takes them while they are on their way, and they come due again should this process die. On PostgreSQL
 * SKIP LOCKED lets senders in other processes claim side by side without waiting on each other's rows; on SQLite
 * the one writer runs claims one at a time. An idle poll is one read on the read connections, not a write.
 */
export async function claimDue(database: DatabaseHandle, now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const anything = await dueDeliveries(database.db, now).select('d.id').limit(1).executeTakeFirst();
  if (anything === undefined) return [];
  const db = database.writer;
  const claimed = await db
    .updateTable('webhook_deliveries')
    .set({ next_attempt_at: now + leaseMs })
    .where(
      'id',
      'in',
      dueDeliveries(db, now)
        .select('d.id')
        .orderBy('d.next_attempt_at')
        .limit(limit)
        .$if(dialectOf(db) === 'postgres', (query) => query.forUpdate('d').skipLocked()),
    )
    .returning('id')
    .execute();
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
 * Stores one attempt's outcome: delivered; or failed, to be tried again after a backoff; or, once it has failed for
 * longer than the retry window, given up, with its endpoint disabled, the rest of its queue given up too and the owner
 * notified, all or nothing. A delivery is updated only while still pending and an endpoint disabled only while
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
      last_status: result.status,
      last_latency_ms: result.latencyMs,
      last_error: result.ok ? null : describeFailure(result),
    };
    const update = trx.updateTable('webhook_deliveries').where('id', '=', delivery.id).where('status', '=', PENDING);
    if (result.ok) {
      await update.set({ ...outcome, status: 'delivered', finished_at: now }).execute();
      return 'delivered';
    }
    if (now - delivery.createdAt < policy.retryForMs) {
      await update.set({ ...outcome, next_attempt_at: now + Math.round(retryDelay(attempts, policy.backoffBaseMs)) }).execute();
      return 'retrying';
    }
    await update.set({ ...outcome, status: 'failed', finished_at: now }).execute();
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
