import type { Executor } from '../../db/index.js';
import { type EventType, eventBit, isPublic, NOTIFIES, TAKES_BACK } from './catalogue.js';

export interface NewEvent {
  type: EventType;
  actorId: number;
  /** The user whose account or content it concerns: notified (unless they are the actor) and whose webhooks fire. */
  ownerId: number;
  articleId?: number;
  commentId?: number;
  /** In the API's own shapes; what webhooks and the live stream send as `data`. */
  data: object;
}

/**
 * Records an event in the transaction of the write it describes, so that a committed write always has its event
 * and a rolled-back one never does, with what it fans out to: the owner's notification and one pending delivery per
 * webhook endpoint of the owner's that wants this type. A few indexed statements; no row every writer shares.
 */
export async function appendEvent(trx: Executor, event: NewEvent, now: number): Promise<number> {
  const { id } = await trx
    .insertInto('events')
    .values({
      type: event.type,
      actor_id: event.actorId,
      owner_id: event.ownerId,
      article_id: event.articleId ?? null,
      public: isPublic(event.type) ? 1 : 0,
      data: JSON.stringify(event.data),
      created_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();

  const notifies = NOTIFIES[event.type];
  // Nobody is told about their own doing.
  if (notifies !== undefined && event.actorId !== event.ownerId) {
    await trx
      .insertInto('notifications')
      .values({
        recipient_id: event.ownerId,
        kind: notifies,
        actor_id: event.actorId,
        article_id: event.articleId ?? null,
        comment_id: event.commentId ?? null,
        endpoint_id: null,
        event_id: id,
        created_at: now,
      })
      .execute();
  }
  const takesBack = TAKES_BACK[event.type];
  if (takesBack !== undefined) {
    await trx
      .deleteFrom('notifications')
      .where('actor_id', '=', event.actorId)
      .where('kind', '=', takesBack)
      .where('recipient_id', '=', event.ownerId)
      .$if(event.articleId !== undefined, (query) => query.where('article_id', '=', event.articleId!))
      .execute();
  }

  await queueDeliveries(trx, { id, type: event.type, ownerId: event.ownerId }, now);
  return id;
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
