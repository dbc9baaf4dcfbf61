import { dialectOf, type Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound, unprocessable } from '../../errors.js';
import { decodeIdCursor, pageOf } from '../../id-cursor.js';
import { toIso } from '../../schemas.js';
import { type EventType, eventMask, typesInMask } from '../events/catalogue.js';
import { ENDPOINTS_MAX } from './schemas.js';
import { newWebhookSecret } from './signature.js';

const ENDPOINT_COLUMNS = ['id', 'url', 'event_mask', 'enabled', 'disabled_reason', 'created_at'] as const;

interface EndpointRow {
  id: number;
  url: string;
  event_mask: number;
  enabled: number;
  disabled_reason: string | null;
  created_at: number;
}

const toWebhook = (row: EndpointRow) => ({
  id: row.id,
  url: row.url,
  events: typesInMask(row.event_mask),
  enabled: row.enabled === 1,
  disabledReason: row.disabled_reason,
  createdAt: toIso(row.created_at),
});

const withSecret = (row: EndpointRow & { secret: string }) => ({ webhook: { ...toWebhook(row), secret: row.secret } });

const ownEndpoints = (db: Executor, ownerId: number) => db.selectFrom('webhook_endpoints').where('owner_id', '=', ownerId);

/**
 * A new endpoint with a new secret, unless the owner has ENDPOINTS_MAX already. A count and an insert in one
 * statement would not be enough on PostgreSQL: two such statements at once each count the rows committed before
 * them and both insert. Locking the owner's row first makes creations by one owner take turns; on SQLite the single
 * writer already does.
 */
export function createEndpoint(db: Executor, ownerId: number, url: string, events: EventType[], now: number) {
  return inTransaction(db, async (trx) => {
    if (dialectOf(trx) === 'postgres') {
      // NO KEY: inserts that only reference the user (articles, follows) are not held up.
      await trx.selectFrom('users').select('id').where('id', '=', ownerId).forNoKeyUpdate().execute();
    }
    const { count } = await ownEndpoints(trx, ownerId)
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow();
    if (Number(count) >= ENDPOINTS_MAX) {
      throw unprocessable('webhook', `cannot be added: you have ${ENDPOINTS_MAX} endpoints, the most allowed; delete one first`);
    }
    const row = await trx
      .insertInto('webhook_endpoints')
      .values({ owner_id: ownerId, url, event_mask: eventMask(events), secret: newWebhookSecret(), created_at: now })
      .returning([...ENDPOINT_COLUMNS, 'secret'])
      .executeTakeFirstOrThrow();
    return withSecret(row);
  });
}

export async function listEndpoints(db: Executor, ownerId: number) {
  const rows = await ownEndpoints(db, ownerId).select(ENDPOINT_COLUMNS).orderBy('id').execute();
  return { webhooks: rows.map(toWebhook) };
}

/** The owner's endpoint; anyone else's is as missing as one that never existed. */
export async function getEndpoint(db: Executor, ownerId: number, id: number) {
  const row = await ownEndpoints(db, ownerId).select(ENDPOINT_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (row === undefined) throw notFound('webhook');
  return { webhook: toWebhook(row) };
}

export async function deleteEndpoint(db: Executor, ownerId: number, id: number): Promise<void> {
  const { numDeletedRows } = await db
    .deleteFrom('webhook_endpoints')
    .where('id', '=', id)
    .where('owner_id', '=', ownerId)
    .executeTakeFirst();
  if (numDeletedRows === 0n) throw notFound('webhook');
}

/** Deliveries already on their way keep the old secret's signature; those sent after this carry the new one's. */
export async function rotateSecret(db: Executor, ownerId: number, id: number) {
  const row = await db
    .updateTable('webhook_endpoints')
    .set({ secret: newWebhookSecret() })
    .where('id', '=', id)
    .where('owner_id', '=', ownerId)
    .returning([...ENDPOINT_COLUMNS, 'secret'])
    .executeTakeFirst();
  if (row === undefined) throw notFound('webhook');
  return withSecret(row);
}

/** New events are queued for it again; what failed while it was disabled comes back only by replay. */
export async function enableEndpoint(db: Executor, ownerId: number, id: number) {
  const row = await db
    .updateTable('webhook_endpoints')
    .set({ enabled: 1, disabled_reason: null })
    .where('id', '=', id)
    .where('owner_id', '=', ownerId)
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirst();
  if (row === undefined) throw notFound('webhook');
  return { webhook: toWebhook(row) };
}

interface DeliveryRow {
  id: number;
  event_id: number;
  type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_status: number | null;
  last_latency_ms: number | null;
  last_error: string | null;
  created_at: number;
  finished_at: number | null;
  next_attempt_at: number;
}

const toDelivery = (row: DeliveryRow) => ({
  id: row.id,
  eventId: String(row.event_id),
  eventType: row.type,
  status: row.status,
  attempts: row.attempts,
  lastStatus: row.last_status,
  lastLatencyMs: row.last_latency_ms,
  lastError: row.last_error,
  createdAt: toIso(row.created_at),
  finishedAt: row.finished_at === null ? null : toIso(row.finished_at),
  // A finished delivery keeps its last schedule in the row; it means nothing to the owner.
  nextAttemptAt: row.status === 'pending' ? toIso(row.next_attempt_at) : null,
});

/** One endpoint's deliveries, newest first, `limit` at a time from the (endpoint_id, id) index. */
export async function listDeliveries(db: Executor, ownerId: number, endpointId: number, limit: number, cursor?: string) {
  const before = cursor === undefined ? undefined : decodeIdCursor(cursor, 'bigint');
  await getEndpoint(db, ownerId, endpointId);
  const rows = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select([
      'd.id',
      'd.event_id',
      'e.type',
      'd.status',
      'd.attempts',
      'd.last_status',
      'd.last_latency_ms',
      'd.last_error',
      'd.created_at',
      'd.finished_at',
      'd.next_attempt_at',
    ])
    .where('d.endpoint_id', '=', endpointId)
    .$if(before !== undefined, (query) => query.where('d.id', '<', before!))
    .orderBy('d.id', 'desc')
    .limit(limit + 1)
    .execute();
  const { page, nextCursor } = pageOf(rows, limit);
  return { deliveries: page.map(toDelivery), nextCursor };
}

/**
 * Queues one more delivery of a past event to this endpoint, whatever types it subscribes to now: the owner asked for
 * this one. Only the owner's own events: anyone else's are as missing as events that never were.
 */
export async function replayEvent(db: Executor, ownerId: number, endpointId: number, eventId: number, now: number) {
  await getEndpoint(db, ownerId, endpointId);
  const event = await db.selectFrom('events').select('type').where('id', '=', eventId).where('owner_id', '=', ownerId).executeTakeFirst();
  if (event === undefined) throw notFound('event');
  const row = await db
    .insertInto('webhook_deliveries')
    .values({ endpoint_id: endpointId, event_id: eventId, status: 'pending', next_attempt_at: now, created_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { delivery: toDelivery({ ...row, type: event.type }) };
}
