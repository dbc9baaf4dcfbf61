import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { HeldCounts } from '../held-counts.js';
import { answerWorkers, type PrimaryChannel } from './primary-channel.js';

/** Gives a place back; called once, when what held it (a live event stream) ends. */
export type GiveBack = () => void;

/**
 * Places a key may hold at once, for as long as it likes (unlike a window's spends, which run out with time): at most
 * `max` per key, counted when taken and given back when their holder ends. A counter that cannot answer rejects, and
 * the limit then lets the holder in uncounted, as every limit does when its counts are out of reach.
 */
export interface PlaceCounter {
  /** One of the `max` places of `key`; null when all are held. */
  take(key: string, max: number): Promise<GiveBack | null>;
}

/** Places counted in this process: right for one process; with WORKERS, each worker would count on its own. */
export function placesInProcess(): PlaceCounter {
  const places = new HeldCounts();
  return {
    take: async (key, max) => (places.take(key, max) ? () => places.give(key) : null),
  };
}

interface TakeRequest {
  /** Names the place among this worker's, so that it can be given back without knowing whether it was taken. */
  place: number;
  key: string;
  max: number;
}

interface GiveRequest {
  place: number;
}

/**
 * In the cluster primary, before it forks: one count of places for every worker. It knows which worker holds which
 * place, so that the places of a worker that exits, however it ends, are given back with it.
 */
export function keepPlacesForWorkers(): void {
  const places = new HeldCounts();
  const ofWorker = new Map<number, Map<number, string>>();
  const give = (held: Map<number, string>, place: number) => {
    const key = held.get(place);
    if (key === undefined) return;
    held.delete(place);
    places.give(key);
  };
  answerWorkers({
    take(worker, { place, key, max }: TakeRequest) {
      // A request read after its worker died would hold a place that nothing gives back.
      if (worker.isDead() || !places.take(key, max)) return false;
      const held = ofWorker.get(worker.id) ?? new Map<number, string>();
      held.set(place, key);
      ofWorker.set(worker.id, held);
      return true;
    },
    give(worker, { place }: GiveRequest) {
      const held = ofWorker.get(worker.id);
      if (held !== undefined) give(held, place);
    },
  });
  cluster.on('exit', (worker) => {
    const held = ofWorker.get(worker.id);
    if (held === undefined) return;
    for (const place of held.keys()) give(held, place);
    ofWorker.delete(worker.id);
  });
}

/** In a cluster worker: places counted by the primary (`keepPlacesForWorkers`), one IPC round trip per take. */
export function placesInPrimary(channel: PrimaryChannel): PlaceCounter {
  let lastPlace = 0;
  return {
    async take(key, max) {
      const place = ++lastPlace;
      const giveBack = () => channel.tell('give', { place } satisfies GiveRequest);
      try {
        return (await channel.ask<boolean>('take', { place, key, max } satisfies TakeRequest)) ? giveBack : null;
      } catch (error) {
        // The take may still arrive and count: the give, sent after it on the same channel, undoes it then.
        giveBack();
        throw error;
      }
    },
  };
}

/**
 * How long a place in Redis lasts unless its instance renews it, which it does every third of this while the place is
 * held: an instance that dies, or loses Redis, with places held leaves them to lapse within this.
 */
export const REDIS_LEASE_MS = 30_000;

// One script, so that counting and taking are one step for every instance sharing Redis. Each key is a sorted set of
// the places held, scored by when their lease ends, on the instances' clock (as the budgets' windows are). Lapsed
// places are dropped before counting; the key's own expiry clears it away once the last lease has ended.
const TAKE = `
local now, max, leaseMs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= max then return 0 end
redis.call('ZADD', KEYS[1], now + leaseMs, ARGV[4])
redis.call('PEXPIRE', KEYS[1], leaseMs)
return 1`;

/**
 * The places kept in Redis for every instance, under `places:`, each named by its instance and a number. While Redis
 * fails, holders go in uncounted; the places already held stay counted while their leases last.
 */
export function placesInRedis(redis: Redis, keyPrefix: string, leaseMs = REDIS_LEASE_MS): PlaceCounter & { close(): void } {
  const instance = randomUUID();
  let lastPlace = 0;
  /** The places this instance holds, by name, with the Redis key of each. */
  const held = new Map<string, string>();
  let renewing: NodeJS.Timeout | undefined;

  const renew = () => {
    const byKey = new Map<string, string[]>();
    for (const [place, redisKey] of held) {
      const places = byKey.get(redisKey);
      if (places === undefined) byKey.set(redisKey, [place]);
      else places.push(place);
    }
    const leaseEnds = Date.now() + leaseMs;
    const renewal = redis.pipeline();
    for (const [redisKey, places] of byKey) {
      renewal.zadd(redisKey, ...places.flatMap((place) => [leaseEnds, place]));
      renewal.pexpire(redisKey, leaseMs);
    }
    // A renewal that fails leaves the leases to the next one, or to lapse: the count only ever errs towards letting in.
    renewal.exec().catch(() => {});
  };
  const give = (place: string, redisKey: string) => {
    held.delete(place);
    if (held.size === 0) {
      clearInterval(renewing);
      renewing = undefined;
    }
    redis.zrem(redisKey, place).catch(() => {});
  };

  return {
    async take(key, max) {
      const place = `${instance}:${++lastPlace}`;
      const redisKey = `${keyPrefix}places:${key}`;
      // When this rejects after Redis took the place all the same, the place lapses with its lease, which nothing renews.
      if ((await redis.eval(TAKE, 1, redisKey, Date.now(), max, leaseMs, place)) !== 1) return null;
      held.set(place, redisKey);
      renewing ??= setInterval(renew, leaseMs / 3).unref();
      return () => give(place, redisKey);
    },
    close: () => clearInterval(renewing),
  };
}
