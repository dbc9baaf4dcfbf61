import type { DatabaseHandle } from '../db/index.js';
import type { EventType } from '../modules/events/catalogue.js';
import { envelope, readEventsById } from '../modules/events/stream.js';

/** One line per event: the envelope webhooks and the live stream send. */
export async function listEvents({ db }: DatabaseHandle, options: { after: number; limit: number; type?: EventType }): Promise<string[]> {
  const events = await readEventsById(db, options.after, options.limit, options.type);
  return events.map(envelope);
}
