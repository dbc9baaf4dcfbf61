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

// One script each, so that spending and refusing are one step for every instance sharing Redis.
const SPEND = `
local spent = redis.call('INCRBY', KEYS[1], ARGV[3])
if spent == tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if spent > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[3])
  return {0, ttl}
end
return {1, ttl}`;
const REFUND = `
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if spent > 0 then redis.call('DECRBY', KEYS[1], math.min(spent, tonumber(ARGV[1]))) end
return 0`;

/** The same budget kept in Redis for every instance. While Redis fails, work goes ahead, as every other limit does. */
export function budgetInRedis(redis: Redis, keyPrefix: string, max: number, windowMs: number): Budget {
  return {
    async spend(key, units) {
      try {
        const [allowed, ttlMs] = (await redis.eval(SPEND, 1, `${keyPrefix}${key}`, windowMs, max, units)) as [number, number];
        return { allowed: allowed === 1, retryAfterSeconds: wholeSeconds(ttlMs) };
      } catch {
        return passWithoutCounting(windowMs);
      }
    },
    async refund(key, units) {
      await redis.eval(REFUND, 1, `${keyPrefix}${key}`, units).catch(() => {});
    },
  };
}
