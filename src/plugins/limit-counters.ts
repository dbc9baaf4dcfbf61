import cluster from 'node:cluster';
import { setWithin } from '../bounded-map.js';

/** A key's fixed window after a spend. */
export interface Tally {
  allowed: boolean;
  /** Units spent in the window, this spend included when allowed. */
  spent: number;
  /** Until the window ends. */
  ttlMs: number;
}

/**
 * Fixed windows of units per key, for one limit: a window starts with the first spend of its key. A spend that would
 * pass `max` is refused and adds nothing. A counter that cannot answer rejects, and every limit then lets the request
 * through: the limits protect the service, they must not take it down.
 */
export interface WindowCounter {
  spend(key: string, units: number, max: number, windowMs: number): Promise<Tally>;
  refund(key: string, units: number): Promise<void>;
}

/** Where the limits of a process keep their counts when Redis does not: each limit, by name, has a counter of its own. */
export type LimitCounters = (limit: string) => WindowCounter;

/**
 * Keys tracked at once per limit. Each window is a few dozen bytes, so this bounds a limit at a few MB; past it the
 * window started longest ago is dropped, and filling it takes more distinct accounts than the per-address limits let
 * one client name within a window.
 */
const MAX_TRACKED_KEYS = 100_000;

interface Window {
  spent: number;
  endsAt: number;
}

class WindowsInMemory {
  private readonly windows = new Map<string, Window>();

  spend(key: string, units: number, max: number, windowMs: number): Tally {
    const now = Date.now();
    let window = this.windows.get(key);
    if (window === undefined || window.endsAt <= now) {
      // A fresh window goes to the back of the queue of what is dropped first.
      this.windows.delete(key);
      window = { spent: 0, endsAt: now + windowMs };
      setWithin(this.windows, MAX_TRACKED_KEYS, key, window);
    }
    const allowed = window.spent + units <= max;
    if (allowed) window.spent += units;
    return { allowed, spent: window.spent, ttlMs: window.endsAt - now };
  }

  refund(key: string, units: number): void {
    const window = this.windows.get(key);
    if (window !== undefined) window.spent = Math.max(0, window.spent - units);
  }
}

/** One in-memory counter per limit name, made when the limit first counts. */
function windowsByLimit(): (limit: string) => WindowsInMemory {
  const limits = new Map<string, WindowsInMemory>();
  return (limit) => {
    let windows = limits.get(limit);
    if (windows === undefined) {
      windows = new WindowsInMemory();
      limits.set(limit, windows);
    }
    return windows;
  };
}

/** Counts kept in this process: right for one process; with WORKERS, each worker would count on its own. */
export function countersInProcess(): LimitCounters {
  const windowsOf = windowsByLimit();
  return (limit) => {
    const windows = windowsOf(limit);
    return {
      spend: async (key, units, max, windowMs) => windows.spend(key, units, max, windowMs),
      refund: async (key, units) => windows.refund(key, units),
    };
  };
}

// The protocol between a worker and the cluster primary. A refund expects no answer; a spend carries an id that its
// answer repeats, since a worker has many in flight at once and one channel for them all.
const MESSAGE_TYPE = 'conduit:limit-counter';

interface SpendRequest {
  type: typeof MESSAGE_TYPE;
  id: number;
  limit: string;
  key: string;
  units: number;
  max: number;
  windowMs: number;
}

interface RefundRequest {
  type: typeof MESSAGE_TYPE;
  limit: string;
  key: string;
  units: number;
}

interface SpendAnswer {
  type: typeof MESSAGE_TYPE;
  id: number;
  tally: Tally;
}

const isCounterMessage = (message: unknown): message is { type: typeof MESSAGE_TYPE } =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === MESSAGE_TYPE;

/**
 * In the cluster primary, before it forks: keeps one set of counters for every worker and answers their spends, so
 * that WORKERS=N processes enforce each limit once, not N times. Only workers this primary forked can send here.
 */
export function keepCountersForWorkers(): void {
  const windowsOf = windowsByLimit();
  // A worker that exited meanwhile cannot be answered; its requests are gone with it.
  const ignoreUndelivered = () => {};
  cluster.on('message', (worker, message: unknown) => {
    if (!isCounterMessage(message)) return;
    const { limit, key, units } = message as RefundRequest;
    if (!('id' in message)) {
      windowsOf(limit).refund(key, units);
      return;
    }
    const { id, max, windowMs } = message as SpendRequest;
    const answer: SpendAnswer = { type: MESSAGE_TYPE, id, tally: windowsOf(limit).spend(key, units, max, windowMs) };
    if (worker.isConnected()) worker.send(answer, ignoreUndelivered);
  });
}

/**
 * Well above a round trip (about 20 µs, 0.1 ms on a busy machine): only a primary that stopped answering takes this
 * long, and meanwhile requests wait no longer than they would on an unreachable Redis.
 */
const PRIMARY_ANSWER_TIMEOUT_MS = 500;

interface Log {
  warn(details: object, message: string): void;
  info(message: string): void;
}

/**
 * In a cluster worker: counters kept by the primary (`keepCountersForWorkers`), one IPC round trip per spend. When
 * the primary does not answer in time, the spend rejects and the request goes through (fail open, as with Redis):
 * the primary does nothing but supervise and count, so a silent one is stalled or gone (then this worker exits with
 * it), and refusing every request of every worker meanwhile would turn a stuck supervisor into an outage.
 */
export function countersInPrimary(log: Log): { counters: LimitCounters; close(): void } {
  let lastId = 0;
  const waiting = new Map<number, { settle: (tally: Tally | Error) => void; timer: NodeJS.Timeout }>();
  let failing = false;

  const settle = (id: number, outcome: Tally | Error) => {
    const request = waiting.get(id);
    if (request === undefined) return;
    waiting.delete(id);
    clearTimeout(request.timer);
    if (outcome instanceof Error && !failing) {
      failing = true;
      log.warn({ err: outcome }, 'the cluster primary does not answer: rate limits are not enforced until it does');
    } else if (!(outcome instanceof Error) && failing) {
      failing = false;
      log.info('the cluster primary answers again: rate limits are enforced');
    }
    request.settle(outcome);
  };
  const onMessage = (message: unknown) => {
    if (isCounterMessage(message)) settle((message as SpendAnswer).id, (message as SpendAnswer).tally);
  };
  process.on('message', onMessage);

  const send = (message: SpendRequest | RefundRequest, onError: (error: Error) => void) => {
    if (process.send === undefined || !process.connected) onError(new Error('no channel to the cluster primary'));
    else process.send(message, (error: Error | null) => error && onError(error));
  };

  const counters: LimitCounters = (limit) => ({
    spend: (key, units, max, windowMs) =>
      new Promise<Tally>((resolve, reject) => {
        const id = ++lastId;
        const timer = setTimeout(
          () => settle(id, new Error(`no answer from the cluster primary within ${PRIMARY_ANSWER_TIMEOUT_MS} ms`)),
          PRIMARY_ANSWER_TIMEOUT_MS,
        );
        waiting.set(id, { settle: (outcome) => (outcome instanceof Error ? reject(outcome) : resolve(outcome)), timer });
        send({ type: MESSAGE_TYPE, id, limit, key, units, max, windowMs }, (error) => settle(id, error));
      }),
    // A refund that is lost leaves the window a unit short until it ends, as a lost one in Redis does.
    refund: async (key, units) => send({ type: MESSAGE_TYPE, limit, key, units }, () => {}),
  });
  return { counters, close: () => process.off('message', onMessage) };
}
