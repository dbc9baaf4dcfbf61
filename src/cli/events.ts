import type { DatabaseHandle } from '../db/index.js';
import { HttpError } from '../errors.js';
import type { EventType } from '../modules/events/catalogue.js';
import { queueDeliveries } from '../modules/events/outbox.js';
import { envelope, readEventsById } from '../modules/events/stream.js';
import { replayEvent } from '../modules/webhooks/queries.js';

/** One line per event: the envelope webhooks and the live stream send. */
export async function listEvents({ db }: DatabaseHandle, options: { after: number; limit: number; type?: EventType }): Promise<string[]> {
  const events = await readEventsById(db, options.after, options.limit, options.type);
  return events.map(envelope);
}

/**
 * Queues the event again for its owner's webhook endpoints: the one given, whatever types it takes, or every
 * enabled one that takes the event's type.
 */
export async function replayEventDeliveries({ db }: DatabaseHandle, eventId: number, endpointId?: number): Promise<string[]> {
  const event = await db.selectFrom('events').select(['id', 'type', 'owner_id']).where('id', '=', eventId).executeTakeFirst();
  if (event?.owner_id == null) throw new Error(`event ${eventId} does not exist (or was purged)`);
  const now = Date.now();
  if (endpointId !== undefined) {
    await replayEvent(db, event.owner_id, endpointId, eventId, now).catch((error: unknown) => {
      throw error instanceof HttpError ? new Error(`endpoint ${endpointId} does not belong to the event's owner`) : error;
    });
    return [`queued event ${eventId} for endpoint ${endpointId}`];
  }
  const queued = await queueDeliveries(db, { id: event.id, type: event.type as EventType, ownerId: event.owner_id }, now);
  return [`queued event ${eventId} for ${queued} endpoint${queued === 1 ? '' : 's'}`];
}
