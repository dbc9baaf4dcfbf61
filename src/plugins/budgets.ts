import type { Redis } from 'ioredis';
import type { WindowCounter } from './limit-counters.js';

export interface Spending {
  allowed: boolean;
  /** Until the window of this key ends. */
  retryAfterSeconds: number;
}

/**
 * Units a key may spend per fixed window, spent before the work they pay for: however many requests arrive at once,
 * the ones let through never add up to more than `max`. A spend that would pass `max` is refused and costs nothing;
 * work that turns out not to count (a successful login) gives its units back.
 */
export interface Budget {
  spend(key: string, units: number): Promise<Spending>;
  refund(key: string, units: number): Promise<void>;
}

const wholeSeconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/** What a spend gets when its counter cannot answer: the work goes ahead. */
const passWithoutCounting = (windowMs: number): Spending => ({ allowed: true, retryAfterSeconds: wholeSeconds(windowMs) });

/** The budget counted by `counter`: in this process, or in the cluster primary for every worker. */
export function budgetOn(counter: WindowCounter, max: number, windowMs: number): Budget {
  return {
    async spend(key, units) {
      try {
        const tally = await counter.spend(key, units, max, windowMs);
        return { allowed: tally.allowed, retryAfterSeconds: wholeSeconds(tally.ttlMs) };
      } catch {
        return passWithoutCounting(windowMs);
      }
    },
    refund: (key, units) => counter.refund(key, units),
  };
}

// One script each, so that spending and refusing are one step for every instance sharing Redis. The window's end is
// kept beside its count, on the instances' clock rather than Redis's, so that every counter runs on one clock (which
// tests can move); the key's expiry only clears it away once it is over.
const SPEND = `
local now, windowMs, max, units = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local window = redis.call('HMGET', KEYS[1], 'spent', 'ends')
local spent, ends = tonumber(window[1]) or 0, tonumber(window[2]) or 0
if ends <= now then spent, ends = 0, now + windowMs end
if spent + units > max then return {0, ends - now} end
redis.call('HSET', KEYS[1], 'spent', spent + units, 'ends', ends)
redis.call('PEXPIRE', KEYS[1], ends - now)
return {1, ends - now}`;
const REFUND = `
local spent = tonumber(redis.call('HGET', KEYS[1], 'spent') or '0')
if spent > 0 then redis.call('HSET', KEYS[1], 'spent', math.max(0, spent - tonumber(ARGV[1]))) end
return 0`;

/**
 * The same budget kept in Redis for every instance. While Redis fails, work goes ahead, as every other limit does.
 * Its keys are hashes under `budget:`, apart from the counters of versions that kept plain numbers.
 */
export function budgetInRedis(redis: Redis, keyPrefix: string, max: number, windowMs: number): Budget {
  const redisKey = (key: string) => `${keyPrefix}budget:${key}`;
  return {
    async spend(key, units) {
      try {
        const [allowed, ttlMs] = (await redis.eval(SPEND, 1, redisKey(key), Date.now(), windowMs, max, units)) as [number, number];
        return { allowed: allowed === 1, retryAfterSeconds: wholeSeconds(ttlMs) };
      } catch {
        return passWithoutCounting(windowMs);
      }
    },
    async refund(key, units) {
      await redis.eval(REFUND, 1, redisKey(key), units).catch(() => {});
    },
  };
}
