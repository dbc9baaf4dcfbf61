import { sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import { toIso } from '../../schemas.js';
import { EVENT_SCHEMA_VERSION, type EventType } from './catalogue.js';

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

function selectEvents(db: Executor) {
  return db
    .selectFrom('events')
    .select(['id', 'tx', 'type', 'actor_id', 'owner_id', 'article_id', 'public', 'data', 'created_at'])
    .$if(dialectOf(db) === 'postgres', (query) => query.where('tx', '<', settledBelow));
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
const DEPARTURES: ReadonlySet<EventType> = new Set(['article.unpublished', 'article.deleted']);

/**
 * The next events after `after`, at most `limit`, in commit order, for the live streams. An event is public as read
 * now, not only as written: one about an article that is not public now (unpublished, hidden, deleted since) is
 * public no longer, so that a stream resuming from long ago does not show an article that anyone else now gets 404
 * on (visibility.ts), the departures excepted; nor a comment hidden since.
 */
export async function readEventsAfter(db: Executor, after: StreamPosition, limit: number): Promise<StoredEvent[]> {
  const now = Date.now();
  const events = selectEvents(db).select((eb) => [
    eb.selectFrom('articles').select('articles.listed_at').whereRef('articles.id', '=', 'events.article_id').as('listed_at'),
    // A comment hidden since (modules/moderation) is public no longer either: its creation would show its body.
    eb.selectFrom('comments').select('comments.hidden_reason').whereRef('comments.id', '=', 'events.comment_id').as('comment_hidden'),
  ]);
  const query =
    dialectOf(db) === 'postgres'
      ? events
          .where((eb) => eb(eb.refTuple('tx', 'id'), '>', eb.tuple(after.tx, after.id)))
          .orderBy('tx')
          .orderBy('id')
      : events.where('id', '>', after.id).orderBy('id');
  return (await query.limit(limit).execute()).map((row) => {
    const stored = toStored(row);
    const articleShown = row.article_id === null || DEPARTURES.has(stored.type) || (row.listed_at !== null && row.listed_at <= now);
    return { ...stored, public: stored.public && articleShown && row.comment_hidden === null };
  });
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
