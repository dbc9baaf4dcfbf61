import type { ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import type { Executor } from '../../db/index.js';
import { type EventType, NOTIFIES } from './catalogue.js';
import { comesAfter, EVENT_BATCH, LiveEvent, type Subscriber } from './dispatcher.js';
import { readEventsAfter, type StreamPosition } from './stream.js';

/**
 * What a client slow to read may hold of the server's memory; past it the client is disconnected. Room for a few of
 * the largest events: an article's body alone may take up to the 1 MiB a request body can have.
 */
const MAX_BACKLOG_BYTES = 4 * 1024 * 1024;
/** How long EventSource waits before reconnecting after the stream ends. */
const RETRY_MS = 3000;
/** On shutdown a stream is ended; one whose client does not take the rest within this is cut. */
const END_GRACE_MS = 1000;

export interface StreamFilter {
  /** The signed-in viewer, who also gets their notifications; null for anonymous streams. */
  viewerId: number | null;
  types: ReadonlySet<EventType> | null;
  tag: string | null;
  /** The author whose articles, and the comments on them, the stream is about: the events' owner. */
  authorId: number | null;
  /**
   * The accounts the signed-in viewer screens (profiles/blocks.ts), as they stood when the stream opened: nothing
   * they did, and nothing about their articles, reaches the viewer. Empty for nearly everyone.
   */
  screened: ReadonlySet<number>;
}

/** The SSE event name the viewer gets `event` under, or null when the stream does not carry it. */
export function eventName(event: LiveEvent, filter: StreamFilter): string | null {
  const { ownerId, actorId, type } = event.stored;
  const screened = (id: number | null) => id !== null && filter.screened.has(id);
  if (screened(ownerId) || screened(actorId)) return null;
  // Theirs whatever the filters: a viewer who asked for one tag still wants to hear that someone followed them.
  if (filter.viewerId !== null && ownerId === filter.viewerId && actorId !== filter.viewerId && NOTIFIES[type] !== undefined) {
    return 'notification';
  }
  if (!event.stored.public) return null;
  if (filter.types !== null && !filter.types.has(type)) return null;
  if (filter.authorId !== null && ownerId !== filter.authorId) return null;
  if (filter.tag !== null && !event.tagList.includes(filter.tag)) return null;
  return type;
}

/**
 * One client's stream: the frames go into `body`, which Fastify pipes into the response, so the request passes through
 * every hook (headers, the log line, metrics) like any other. A resuming stream holds the live events back while the
 * missed ones are read from the database, then sends those of them it has not already sent.
 */
export class EventStream implements Subscriber {
  readonly body = new PassThrough();
  private held: LiveEvent[] | null;
  private heldBytes = 0;
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly filter: StreamFilter,
    private readonly response: ServerResponse,
    heartbeatMs: number,
    resuming: boolean,
  ) {
    this.held = resuming ? [] : null;
    this.write(`retry: ${RETRY_MS}\n\n`);
    this.heartbeat = setInterval(() => this.write(': ping\n\n'), heartbeatMs);
    this.body.on('close', () => clearInterval(this.heartbeat));
  }

  deliver(event: LiveEvent): void {
    if (this.held === null) {
      this.send(event);
      return;
    }
    this.held.push(event);
    this.heldBytes += event.envelope.length;
    if (this.heldBytes > MAX_BACKLOG_BYTES) this.cut();
  }

  end(): void {
    this.body.end();
    const timer = setTimeout(() => this.cut(), END_GRACE_MS).unref();
    this.body.on('close', () => clearTimeout(timer));
  }

  cut(): void {
    this.response.destroy();
    this.body.destroy();
  }

  /**
   * Sends what the database holds after `from`, as fast as the client takes it, until it reaches the live events (which
   * begin after `live`) or the end of the outbox; then the held live events not sent yet. However far behind the
   * client is, no more than a batch is in memory.
   */
  async catchUp(db: Executor, from: StreamPosition, live: StreamPosition): Promise<void> {
    let position = from;
    for (;;) {
      const batch = await readEventsAfter(db, position, EVENT_BATCH);
      for (const stored of batch) {
        if (this.body.destroyed) return;
        const event = new LiveEvent(stored);
        this.send(event);
        position = event.position;
        if (this.body.writableNeedDrain) await this.drained();
      }
      if (batch.length < EVENT_BATCH || !comesAfter(live, position)) break;
    }
    const held = this.held ?? [];
    this.held = null;
    for (const event of held) if (comesAfter(event.position, position)) this.send(event);
  }

  private send(event: LiveEvent): void {
    const name = eventName(event, this.filter);
    if (name !== null) this.write(`id: ${event.stored.id}\nevent: ${name}\ndata: ${event.envelope}\n\n`);
  }

  private write(frame: string): void {
    if (!this.body.writable) return;
    this.body.write(frame);
    const backlog = this.body.writableLength + this.body.readableLength + this.response.writableLength;
    if (backlog > MAX_BACKLOG_BYTES) this.cut();
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      this.body.once('drain', resolve);
      this.body.once('close', resolve);
    });
  }
}
