import { sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import { toIso } from '../../schemas.js';
import { EVENT_SCHEMA_VERSION, type EventType, NOTIFIES } from './catalogue.js';

/**
 * A place in the outbox's commit order. On PostgreSQL that is (transaction id, event id), read only below the oldest
 * transaction still running: every event a later read can find sorts after every event an earlier read returned,
 * so a reader that keeps its last position never skips one. On SQLite tx is always 0 and ids come in commit order.
 */
export interface StreamPosition {
  tx: number;
  id: number;
}

export const STREAM_START: StreamPosition = { tx: 0, id: 0 };

export interface StoredEvent {
  id: number;
  tx: number;
  type: EventType;
  actorId: number | null;
  ownerId: number | null;
  articleId: number | null;
  public: boolean;
  /** The `data` JSON as stored, so that a fan-out to many streams parses it at most once per use. */
  data: string;
  createdAt: number;
}

/** Everything below this transaction id has committed or rolled back; what sits above it may still appear. */
const settledBelow = sql<number>`pg_snapshot_xmin(pg_current_snapshot())::text::bigint`;

/** The events a reader may go past: on PostgreSQL, those of the transactions that have finished. */
const settledEvents = (db: Executor) =>
  db.selectFrom('events').$if(dialectOf(db) === 'postgres', (query) => query.where('tx', '<', settledBelow));

function selectEvents(db: Executor) {
  return settledEvents(db).select(['id', 'tx', 'type', 'actor_id', 'owner_id', 'article_id', 'public', 'data', 'created_at']);
}

type EventRow = Awaited<ReturnType<ReturnType<typeof selectEvents>['execute']>>[number];

const toStored = (row: EventRow): StoredEvent => ({
  id: row.id,
  tx: row.tx,
  type: row.type as EventType,
  actorId: row.actor_id,
  ownerId: row.owner_id,
  articleId: row.article_id,
  public: Boolean(row.public),
  data: row.data,
  createdAt: row.created_at,
});

/** Notices that an article went away: they name it only, and tell a consumer what to drop. */
const DEPARTURES: ReadonlySet<EventType> = new Set(['article.unpublished', 'article.deleted', 'article.hidden', 'comment.hidden']);

/**
 * What a reader wants of the outbox, as far as the database can tell: the public events of these types (all of them
 * when null) about this owner's content (anyone's when null), and the events that notify `notifiedId`. A pre-filter
 * only: the stream still decides each event it sends (event-stream.ts), so this may let through more, never less.
 */
export interface OutboxWanted {
  publicTypes: readonly EventType[] | null;
  ownerId: number | null;
  notifiedId: number | null;
}

/** The types that make a notification: an event of another type is never one, whoever it concerns. */
const NOTIFYING_TYPES = Object.keys(NOTIFIES) as EventType[];

/** An event as read for the streams, with what it takes to tell whether it is public now. */
function selectStreamEvents(db: Executor, wanted: OutboxWanted | null) {
  return selectEvents(db)
    .select((eb) => [
      eb.selectFrom('articles').select('articles.listed_at').whereRef('articles.id', '=', 'events.article_id').as('listed_at'),
      eb.selectFrom('comments').select('comments.hidden_reason').whereRef('comments.id', '=', 'events.comment_id').as('comment_hidden'),
    ])
    .$if(wanted !== null, (query) =>
      query.where((eb) => {
        const { publicTypes, ownerId, notifiedId } = wanted!;
        const publicWanted = [eb('public', '=', 1)];
        if (publicTypes !== null) publicWanted.push(eb('type', 'in', publicTypes));
        if (ownerId !== null) publicWanted.push(eb('owner_id', '=', ownerId));
        if (notifiedId === null) return eb.and(publicWanted);
        return eb.or([eb.and(publicWanted), eb.and([eb('owner_id', '=', notifiedId), eb('type', 'in', NOTIFYING_TYPES)])]);
      }),
    );
}

/** An event's place in commit order compared with `position`: on PostgreSQL (tx, id), on SQLite the id. */
const comparedTo = (db: Executor, operator: '>' | '<=', position: StreamPosition) =>
  dialectOf(db) === 'postgres'
    ? sql<boolean>`(tx, id) ${sql.raw(operator)} (${position.tx}, ${position.id})`
    : sql<boolean>`id ${sql.raw(operator)} ${position.id}`;

const inCommitOrder = <Q extends { orderBy(column: 'tx' | 'id'): Q }>(db: Executor, query: Q): Q =>
  dialectOf(db) === 'postgres' ? query.orderBy('tx').orderBy('id') : query.orderBy('id');

/**
 * An event is public as read now, not only as written: one about an article that is not public now (unpublished,
 * hidden, deleted since) is public no longer, so that a stream resuming from long ago does not show an article that
 * anyone else now gets 404 on (visibility.ts), nor a comment a moderator has hidden since, the departures excepted.
 */
function asShownNow(row: StreamEventRow, now: number): StoredEvent {
  const stored = toStored(row);
  const shown =
    DEPARTURES.has(stored.type) ||
    ((row.article_id === null || (row.listed_at !== null && row.listed_at <= now)) && row.comment_hidden === null);
  return { ...stored, public: stored.public && shown };
}

type StreamEventRow = Awaited<ReturnType<ReturnType<typeof selectStreamEvents>['execute']>>[number];

/** The next events after `after`, at most `limit`, in commit order, for the live streams (see asShownNow). */
export async function readEventsAfter(db: Executor, after: StreamPosition, limit: number): Promise<StoredEvent[]> {
  const now = Date.now();
  const rows = await inCommitOrder(db, selectStreamEvents(db, null).where(comparedTo(db, '>', after)))
    .limit(limit)
    .execute();
  return rows.map((row) => asShownNow(row, now));
}

/** A stretch of the outbox read for one stream: what it may want of it, and where the stretch ends. */
export interface OutboxStretch {
  events: StoredEvent[];
  /** The position of the stretch's last event, whether wanted or not; null when the stretch reached the outbox's end. */
  through: StreamPosition | null;
}

/**
 * Where the `length` events after `after` end in commit order, found without reading any event's data; null when fewer
 * are left. On SQLite ids are commit order and nearly dense, so the stretch is an id range from the next event on
 * (a gap that retention or a purge left before it is skipped, holes inside it only make it hold fewer): two lookups on
 * the primary key instead of a walk through rows as large as their data. On PostgreSQL, a walk on the (tx, id) index.
 */
async function stretchEnd(db: Executor, after: StreamPosition, length: number): Promise<StreamPosition | null> {
  if (dialectOf(db) === 'sqlite') {
    const next = await db.selectFrom('events').select('id').where('id', '>', after.id).orderBy('id').limit(1).executeTakeFirst();
    const newest = await db.selectFrom('events').select('id').orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (next === undefined || newest === undefined) return null;
    const end = next.id + length - 1;
    return end < newest.id ? { tx: 0, id: end } : null;
  }
  const last = await inCommitOrder(
    db,
    settledEvents(db)
      .select(['tx', 'id'])
      .where(comparedTo(db, '>', after)),
  )
    .offset(length - 1)
    .limit(1)
    .executeTakeFirst();
  return last === undefined ? null : { tx: Number(last.tx), id: Number(last.id) };
}

/**
 * At most the next `length` events after `after` in commit order, of which only those `wanted` are read whole: a
 * filter that matches nothing costs no event's data, and however little matches, one read never covers more.
 */
export async function readStretchAfter(db: Executor, after: StreamPosition, length: number, wanted: OutboxWanted): Promise<OutboxStretch> {
  const through = await stretchEnd(db, after, length);
  const now = Date.now();
  const rows = await inCommitOrder(
    db,
    selectStreamEvents(db, wanted)
      .where(comparedTo(db, '>', after))
      .$if(through !== null, (query) => query.where(comparedTo(db, '<=', through!))),
  )
    .limit(length)
    .execute();
  return { events: rows.map((row) => asShownNow(row, now)), through };
}

/** Events with ids above `after`, in id order: for operators (the CLI), who think in ids, not in commit order. */
export async function readEventsById(db: Executor, after: number, limit: number, type?: EventType): Promise<StoredEvent[]> {
  const rows = await selectEvents(db)
    .where('id', '>', after)
    .$if(type !== undefined, (query) => query.where('type', '=', type!))
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(toStored);
}

/** Where a reader starting now begins: after the last event it could already see. */
export async function streamHead(db: Executor): Promise<StreamPosition> {
  const newest = dialectOf(db) === 'postgres' ? selectEvents(db).orderBy('tx', 'desc') : selectEvents(db);
  const last = await newest.orderBy('id', 'desc').limit(1).executeTakeFirst();
  return last === undefined ? STREAM_START : { tx: last.tx, id: last.id };
}

/**
 * The position right after event `id`, as a client's Last-Event-ID names it. When that event has been purged, the
 * reader resumes at the oldest transaction of the events after it: nothing after it is lost, and only an event that
 * committed out of id order across that boundary could come twice.
 */
export async function positionAfterEvent(db: Executor, id: number): Promise<StreamPosition> {
  if (dialectOf(db) === 'sqlite') return { tx: 0, id };
  const known = await db.selectFrom('events').select(['tx', 'id']).where('id', '=', id).executeTakeFirst();
  if (known !== undefined) return known;
  const next = await db
    .selectFrom('events')
    .select((eb) => eb.fn.min('tx').as('tx'))
    .where('id', '>', id)
    .executeTakeFirst();
  const tx = next?.tx ?? null;
  return tx === null ? streamHead(db) : { tx: Number(tx) - 1, id: Number.MAX_SAFE_INTEGER };
}

/** The message every consumer gets, on the stream and in webhooks: versioned, with the API's own shapes as `data`. */
export function envelope(event: Pick<StoredEvent, 'id' | 'type' | 'createdAt' | 'data'>): string {
  return `{"id":"${event.id}","type":"${event.type}","version":${EVENT_SCHEMA_VERSION},"timestamp":"${toIso(event.createdAt)}","data":${event.data}}`;
}
