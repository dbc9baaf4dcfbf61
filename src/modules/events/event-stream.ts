import type { ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import type { Executor } from '../../db/index.js';
import type { BufferBudget, Buffered } from './buffer-budget.js';
import { type EventType, NOTIFIES } from './catalogue.js';
import { comesAfter, EVENT_BATCH, LiveEvent, type Subscriber } from './dispatcher.js';
import { type OutboxWanted, readStretchAfter, type StreamPosition } from './stream.js';

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

/** How much of the outbox one resuming request may go through before the client is told to resume further on. */
export interface ReplayLimits {
  maxEvents: number;
  maxBytes: number;
}

/** The filters the database can apply itself, so that what a stream does not want is never read whole. */
const outboxWanted = (filter: StreamFilter): OutboxWanted => ({
  publicTypes: filter.types === null ? null : [...filter.types],
  ownerId: filter.authorId,
  notifiedId: filter.viewerId,
});

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * One client's stream: the frames go into `body`, which Fastify pipes into the response, so the request passes through
 * every hook (headers, the log line, metrics) like any other. A resuming stream holds the live events back while the
 * missed ones are read from the database, then sends those of them it has not already sent.
 */
export class EventStream implements Subscriber, Buffered {
  readonly body = new PassThrough();
  private held: LiveEvent[] | null;
  private heldBytes = 0;
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly filter: StreamFilter,
    private readonly response: ServerResponse,
    private readonly budget: BufferBudget,
    { heartbeatMs, resuming }: { heartbeatMs: number; resuming: boolean },
  ) {
    this.held = resuming ? [] : null;
    this.write(`retry: ${RETRY_MS}\n\n`);
    this.heartbeat = setInterval(() => this.write(': ping\n\n'), heartbeatMs);
    this.body.on('close', () => {
      clearInterval(this.heartbeat);
      budget.forget(this);
    });
  }

  deliver(event: LiveEvent): void {
    if (this.held === null) {
      this.send(event);
      return;
    }
    this.held.push(event);
    this.heldBytes += event.envelope.length;
    if (this.heldBytes > MAX_BACKLOG_BYTES) this.cut();
    else this.budget.charge(this);
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

  backlog(): number {
    return this.heldBytes + this.body.writableLength + this.body.readableLength + this.response.writableLength;
  }

  /**
   * Sends what the database holds after `from`, as fast as the client takes it, until it reaches the live events (which
   * begin after `live`) or the end of the outbox; then the held live events not sent yet. However far behind the
   * client is, no more than a batch is in memory, the event loop is let go between batches, and past `limits` the
   * client is told where to resume (resumeLater).
   */
  async catchUp(db: Executor, from: StreamPosition, live: StreamPosition, limits: ReplayLimits): Promise<void> {
    const wanted = outboxWanted(this.filter);
    let position = from;
    let scanned = 0;
    let sentBytes = 0;
    replay: for (;;) {
      const length = Math.min(EVENT_BATCH, limits.maxEvents - scanned);
      const stretch = await readStretchAfter(db, position, length, wanted);
      for (const stored of stretch.events) {
        if (this.body.destroyed) return;
        const event = new LiveEvent(stored);
        // Past the live start the dispatcher hands it over (held until now, or later, once it has read that far): sent
        // here as well, it would come twice when the dispatcher lags behind what other processes wrote.
        if (comesAfter(event.position, live)) break replay;
        sentBytes += this.send(event);
        position = event.position;
        if (sentBytes >= limits.maxBytes && comesAfter(live, position)) return this.resumeLater(position);
        if (this.body.writableNeedDrain) await this.drained();
      }
      if (stretch.through === null) break;
      position = stretch.through;
      if (!comesAfter(live, position)) break;
      scanned += length;
      if (scanned >= limits.maxEvents) return this.resumeLater(position);
      await nextTurn();
    }
    const held = this.held ?? [];
    this.held = null;
    this.heldBytes = 0;
    for (const event of held) if (comesAfter(event.position, position)) this.send(event);
  }

  /**
   * Ends a replay that reached its limits: an `id:` line without data moves EventSource's Last-Event-ID to the last
   * event gone through (sent or not wanted) without firing an event, and the client reconnects from there, after the
   * `retry:` wait; the comment says the same to other clients.
   */
  private resumeLater(position: StreamPosition): void {
    this.held = null;
    this.heldBytes = 0;
    this.write(`: replay limit reached; reconnect with Last-Event-ID ${position.id} to go on\nid: ${position.id}\n\n`);
    this.body.end();
  }

  /** The bytes of the frame written, 0 when the stream does not carry the event. */
  private send(event: LiveEvent): number {
    const name = eventName(event, this.filter);
    if (name === null) return 0;
    const frame = `id: ${event.stored.id}\nevent: ${name}\ndata: ${event.envelope}\n\n`;
    this.write(frame);
    return frame.length;
  }

  private write(frame: string): void {
    if (!this.body.writable) return;
    this.body.write(frame);
    if (this.backlog() > MAX_BACKLOG_BYTES) this.cut();
    else this.budget.charge(this);
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      this.body.once('drain', resolve);
      this.body.once('close', resolve);
    });
  }
}
