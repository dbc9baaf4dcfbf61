import { type OperationNodeSource, sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { type EventType, eventBit, isPublic } from './catalogue.js';

export interface NewEvent {
  type: EventType;
  actorId: number;
  /** The user whose account or content it concerns: notified (unless they are the actor) and whose webhooks fire. */
  ownerId: number;
  articleId?: number;
  commentId?: number;
  /** In the API's own shapes; what webhooks and the live stream send as `data`. */
  data: object;
  /**
   * False keeps an event of a public type off the public stream: it concerns an article that is not public (a draft,
   * a scheduled or unpublished article), which only its author may know of. Its owner's webhooks still get it.
   */
  public?: boolean;
}

const publicFlag = (event: NewEvent) => (isPublic(event.type) && event.public !== false ? 1 : 0);

/**
 * How an event names an article it is not about in full (a deletion, a favorite, a comment): enough to link to it and
 * show its title.
 */
export const mentionOf = (article: { slug: string; title: string }) => ({ slug: article.slug, title: article.title });

/**
 * Records an event in the transaction of the write it describes, so that a committed write always has its event
 * and a rolled-back one never does. What it fans out to (the owner's notification, a pending delivery per webhook
 * endpoint of the owner's that wants this type) the database adds in the same statement (migration 0009's trigger).
 */
export async function appendEvent(trx: Executor, event: NewEvent, now: number): Promise<void> {
  await trx
    .insertInto('events')
    .values({
      type: event.type,
      actor_id: event.actorId,
      owner_id: event.ownerId,
      article_id: event.articleId ?? null,
      comment_id: event.commentId ?? null,
      public: publicFlag(event),
      data: JSON.stringify(event.data),
      created_at: now,
    })
    .execute();
}

/** A change that returns one row per row it changed: none, when it changed nothing. */
type Change = OperationNodeSource & { execute(): Promise<unknown[]> };

/**
 * A change and its event, all or nothing, the event only when the change changed something (a repeated follow or
 * favorite is none). On PostgreSQL one statement, the change in a WITH and the event inserted from what it returned:
 * one round trip instead of four (begin, change, event, commit) on the writes users repeat most. On SQLite, where a
 * statement costs no round trip, a transaction, or the caller's. Returns whether the change changed anything.
 */
export async function changeWithEvent(
  db: Executor,
  change: (executor: Executor) => Change,
  event: NewEvent,
  now: number,
): Promise<boolean> {
  if (dialectOf(db) === 'sqlite') {
    const changeAndTell = async (trx: Executor) => {
      const changed = (await change(trx).execute()).length > 0;
      if (changed) await appendEvent(trx, event, now);
      return changed;
    };
    return db.isTransaction ? changeAndTell(db) : inTransaction(db, changeAndTell);
  }
  // Typed, because PostgreSQL reads an untyped parameter in a SELECT list as text.
  const result = await sql`
    with changed as (${change(db)})
    insert into events (type, actor_id, owner_id, article_id, comment_id, public, data, created_at)
    select ${event.type}, ${event.actorId}::integer, ${event.ownerId}::integer, ${event.articleId ?? null}::integer,
      ${event.commentId ?? null}::integer, ${publicFlag(event)}::integer, ${JSON.stringify(event.data)}, ${now}::bigint
    from changed`.execute(db);
  return Number(result.numAffectedRows ?? 0n) > 0;
}

/**
 * One pending delivery of the event per enabled endpoint of its owner that wants its type; how many were queued.
 * One statement, whatever the number of endpoints.
 */
export async function queueDeliveries(db: Executor, event: { id: number; type: EventType; ownerId: number }, now: number): Promise<number> {
  const result = await db
    .insertInto('webhook_deliveries')
    .columns(['endpoint_id', 'event_id', 'status', 'next_attempt_at', 'created_at'])
    .expression((eb) =>
      eb
        .selectFrom('webhook_endpoints')
        .select((inner) => [
          'webhook_endpoints.id',
          inner.cast<number>(inner.val(event.id), 'bigint').as('event_id'),
          inner.cast<'pending'>(inner.val('pending'), 'text').as('status'),
          inner.cast<number>(inner.val(now), 'bigint').as('next_attempt_at'),
          inner.cast<number>(inner.val(now), 'bigint').as('created_at'),
        ])
        .where('webhook_endpoints.owner_id', '=', event.ownerId)
        .where('webhook_endpoints.enabled', '=', 1)
        .where((inner) => inner(inner('webhook_endpoints.event_mask', '&', eventBit(event.type)), '<>', 0)),
    )
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n);
}
