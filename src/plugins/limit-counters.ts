import { setWithin } from '../bounded-map.js';
import { answerWorkers, type PrimaryChannel } from './primary-channel.js';

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

interface SpendRequest {
  limit: string;
  key: string;
  units: number;
  max: number;
  windowMs: number;
}

interface RefundRequest {
  limit: string;
  key: string;
  units: number;
}

/**
 * In the cluster primary, before it forks: keeps one set of counters for every worker and answers their spends, so
 * that WORKERS=N processes enforce each limit once, not N times.
 */
export function keepCountersForWorkers(): void {
  const windowsOf = windowsByLimit();
  answerWorkers({
    spend: (_worker, { limit, key, units, max, windowMs }: SpendRequest): Tally => windowsOf(limit).spend(key, units, max, windowMs),
    refund: (_worker, { limit, key, units }: RefundRequest) => windowsOf(limit).refund(key, units),
  });
}

/** In a cluster worker: counters kept by the primary (`keepCountersForWorkers`), one IPC round trip per spend. */
export function countersInPrimary(channel: PrimaryChannel): LimitCounters {
  return (limit) => ({
    spend: (key, units, max, windowMs) => channel.ask<Tally>('spend', { limit, key, units, max, windowMs } satisfies SpendRequest),
    // A refund that is lost leaves the window a unit short until it ends, as a lost one in Redis does.
    refund: async (key, units) => channel.tell('refund', { limit, key, units } satisfies RefundRequest),
  });
}
