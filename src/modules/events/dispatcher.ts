import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import type { DatabaseConfig, EventStreamConfig } from '../../config.js';
import type { DatabaseHandle, Executor } from '../../db/index.js';
import { READ_METHODS } from '../../read-methods.js';
import { BufferBudget } from './buffer-budget.js';
import type { EventType } from './catalogue.js';
import { envelope, readEventsAfter, type StoredEvent, type StreamPosition, streamHead } from './stream.js';

declare module 'fastify' {
  interface FastifyInstance {
    events: EventDispatcher;
  }
}

/** Events read per query: the poller's and a resuming stream's. */
export const EVENT_BATCH = 500;
/**
 * How often the outbox is read while someone listens, whatever else wakes the poller: other processes of a WORKERS
 * cluster write to the same SQLite file unseen, and on PostgreSQL a NOTIFY can be lost while the listener reconnects.
 */
const POLL_INTERVAL_MS = 500;
/** At most one NOTIFY per this long per process: a burst of writes costs one, sent after the last of them. */
const NOTIFY_DEBOUNCE_MS = 50;
const LISTEN_RETRY_MS = 1000;
const CHANNEL = 'conduit_events';

export const comesAfter = (a: StreamPosition, b: StreamPosition): boolean => a.tx > b.tx || (a.tx === b.tx && a.id > b.id);

/** An event as the streams see it: its envelope is built, and its `data` parsed, at most once however many get it. */
export class LiveEvent {
  readonly position: StreamPosition;
  private message: string | undefined;
  private tags: string[] | undefined;

  constructor(readonly stored: StoredEvent) {
    this.position = { tx: stored.tx, id: stored.id };
  }

  get type(): EventType {
    return this.stored.type;
  }

  get envelope(): string {
    this.message ??= envelope(this.stored);
    return this.message;
  }

  /** The article's tags for the events that carry the whole article; none for the others. */
  get tagList(): string[] {
    this.tags ??= (JSON.parse(this.stored.data) as { article?: { tagList?: string[] } }).article?.tagList ?? [];
    return this.tags;
  }
}

export interface Subscriber {
  deliver(event: LiveEvent): void;
  /** The process is shutting down: the stream ends, so that closing the server does not wait on it. */
  end(): void;
}

interface Log {
  warn(details: object, message: string): void;
}

/**
 * The one reader of the outbox in this process: it keeps a position in commit order and hands each new event, in
 * memory, to every open stream, so that a thousand streams cost one query per wake-up instead of a thousand. It reads
 * only while a stream is open, and then when this process has written, when another process has said so (NOTIFY on
 * PostgreSQL), and every POLL_INTERVAL_MS in any case.
 */
export class EventDispatcher {
  /** What all the streams of this process may hold for their clients together. */
  readonly buffers: BufferBudget;
  private readonly subscribers = new Set<Subscriber>();
  private admitted = 0;
  private position: StreamPosition = { tx: 0, id: 0 };
  /** Every read and every change of position runs in this chain, one at a time, in order. */
  private chain: Promise<void> = Promise.resolve();
  private pollQueued = false;
  private timer: NodeJS.Timeout | undefined;
  private lastFannedOutAt: number | null = null;
  private notifier: Notifier | null;
  private closed = false;

  constructor(
    private readonly db: Executor,
    private readonly log: Log,
    database: DatabaseConfig,
    private readonly limits: EventStreamConfig,
  ) {
    this.buffers = new BufferBudget(limits.bufferBudgetBytes);
    this.notifier = database.kind === 'postgres' ? new Notifier(database.directUrl, log, () => this.wake()) : null;
  }

  /** Streams open in this process, counted from admission, before they subscribe. */
  get open(): number {
    return this.admitted;
  }

  /**
   * Counts a new stream in, or says false when the process holds as many as allowed; every admitted stream is released
   * once. Per process: each holds its own streams, and their memory.
   */
  admit(): boolean {
    if (this.limits.max > 0 && this.admitted >= this.limits.max) return false;
    this.admitted++;
    return true;
  }

  release(): void {
    this.admitted--;
  }

  /** Seconds between now and the last event handed out, when the poller has not caught up with the outbox; else 0. */
  lagSeconds(now = Date.now()): number {
    return this.lastFannedOutAt === null ? 0 : Math.max(0, now - this.lastFannedOutAt) / 1000;
  }

  bufferedBytes(): number {
    return this.buffers.held();
  }

  start(): void {
    this.timer = setInterval(() => this.wake(), POLL_INTERVAL_MS).unref();
  }

  /**
   * Adds a stream; it gets every event after the position this resolves to. While nobody listened the poller kept
   * no position, so the first stream starts it at the head of the outbox.
   */
  subscribe(subscriber: Subscriber): Promise<StreamPosition> {
    return this.serially(async () => {
      if (this.subscribers.size === 0 && !this.closed) this.position = await streamHead(this.db);
      // Closed meanwhile, after close() ended the others: this one ends at once too, or the server would wait for it.
      if (this.closed) {
        subscriber.end();
      } else {
        this.subscribers.add(subscriber);
        this.notifier?.start();
      }
      return this.position;
    });
  }

  unsubscribe(subscriber: Subscriber): void {
    this.subscribers.delete(subscriber);
  }

  /** Something may have been written: read the outbox soon, once however many ask meanwhile. */
  wake(): void {
    if (this.subscribers.size === 0 || this.pollQueued || this.closed) return;
    this.pollQueued = true;
    void this.serially(() => {
      this.pollQueued = false;
      return this.poll();
    });
  }

  /** This process has committed a write: its own streams hear of it at once, the other processes' soon after. */
  written(): void {
    if (this.closed) return;
    this.wake();
    this.notifier?.notifySoon();
  }

  /** Ends every stream, then waits for the read in progress, so that the database can be closed after. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    for (const subscriber of this.subscribers) subscriber.end();
    this.subscribers.clear();
    await this.chain;
    await this.notifier?.close();
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const result = this.chain.then(work);
    this.chain = result.then(
      () => {},
      () => {},
    );
    return result;
  }

  private async poll(): Promise<void> {
    try {
      while (this.subscribers.size > 0) {
        const batch = await readEventsAfter(this.db, this.position, EVENT_BATCH);
        for (const stored of batch) {
          const event = new LiveEvent(stored);
          for (const subscriber of this.subscribers) subscriber.deliver(event);
          this.position = event.position;
        }
        const caughtUp = batch.length < EVENT_BATCH;
        this.lastFannedOutAt = caughtUp ? null : (batch.at(-1)?.createdAt ?? null);
        if (caughtUp) return;
      }
    } catch (error) {
      // The next wake-up reads again from the same position: nothing is skipped, the streams only wait.
      this.log.warn({ err: error }, 'could not read the outbox for the live event streams');
    }
  }
}

/**
 * PostgreSQL's LISTEN/NOTIFY between the processes on one database, both on one connection of its own, opened when
 * this process first has a stream or a write to tell of: a pooled connection would stop listening when handed back,
 * and the pools stay the requests'. It goes straight to PostgreSQL (DATABASE_DIRECT_URL): a pooler in transaction
 * mode would leave the LISTEN on whichever server connection it chose, and hear nothing. The NOTIFY is sent after the
 * write has committed, never inside its transaction: a transaction that notifies takes a lock shared by the whole
 * database at commit, which would line up every write.
 */
class Notifier {
  private client: pg.Client | null = null;
  private started = false;
  private retry: NodeJS.Timeout | undefined;
  private pending: NodeJS.Timeout | undefined;
  private lastSentAt = 0;

  constructor(
    private readonly url: string,
    private readonly log: Log,
    private readonly heard: () => void,
  ) {}

  start(): void {
    if (this.started) return;
    this.started = true;
    void this.connect();
  }

  notifySoon(): void {
    this.start();
    if (this.pending !== undefined) return;
    const wait = Math.max(0, this.lastSentAt + NOTIFY_DEBOUNCE_MS - Date.now());
    this.pending = setTimeout(() => {
      this.pending = undefined;
      this.lastSentAt = Date.now();
      // Lost while reconnecting, a NOTIFY delays the other processes' streams by one poll interval at most.
      this.client?.query(`notify ${CHANNEL}`).catch((error: unknown) => {
        this.log.warn({ err: error }, 'could not notify the other processes of a write');
      });
    }, wait);
  }

  async close(): Promise<void> {
    this.started = false;
    clearTimeout(this.retry);
    clearTimeout(this.pending);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    this.client = client;
    client.on('notification', this.heard);
    client.on('error', (error) => this.reconnect(client, error));
    client.on('end', () => this.reconnect(client, null));
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
      // Closed while connecting: this connection is nobody's any more.
      if (this.client !== client) return void (await client.end());
      // Whatever was written while not listening is read now, not at the next poll.
      this.heard();
    } catch (error) {
      this.reconnect(client, error);
    }
  }

  private reconnect(client: pg.Client, error: unknown): void {
    if (this.client !== client) return;
    this.client = null;
    client.end().catch(() => {});
    if (!this.started) return;
    if (error !== null) this.log.warn({ err: error }, 'lost the connection for event notifications; reconnecting');
    this.retry = setTimeout(() => void this.connect(), LISTEN_RETRY_MS).unref();
  }
}

/**
 * One dispatcher per app: started when the app is ready, its streams ended before the server closes (preClose; the
 * server would otherwise wait for them), and woken by every write this process answered as done.
 */
export function installEventDispatcher(app: FastifyInstance, database: DatabaseHandle): EventDispatcher {
  const dispatcher = new EventDispatcher(database.db, app.log, app.config.database, app.config.events);
  app.decorate('events', dispatcher);
  app.addHook('onReady', async () => dispatcher.start());
  app.addHook('preClose', async () => dispatcher.close());
  app.addHook('onResponse', (request, reply, done) => {
    if (!READ_METHODS.has(request.method) && reply.statusCode < 400) dispatcher.written();
    done();
  });
  return dispatcher;
}
