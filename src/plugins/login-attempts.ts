import type { Redis } from 'ioredis';

export interface Reservation {
  allowed: boolean;
  /** Until the window of this key ends. */
  retryAfterSeconds: number;
}

/**
 * Login attempts per account, counted before the password is checked: a try holds one of `max` places in the
 * window while argon2 runs, so however many guesses arrive at once, at most `max` are ever checked. A successful
 * login gives its place back; a failed one keeps it until the window ends.
 */
export interface LoginAttempts {
  reserve(account: string): Promise<Reservation>;
  release(account: string): Promise<void>;
}

interface Window {
  count: number;
  endsAt: number;
}

/**
 * Accounts tracked at once in one process. Each window is a few dozen bytes, so this bounds the map at a few MB;
 * past it the oldest window is dropped, and filling it needs more distinct emails than the per-address limit
 * lets any one client send.
 */
const MAX_TRACKED_ACCOUNTS = 100_000;

export function loginAttemptsInProcess(max: number, windowMs: number): LoginAttempts {
  const windows = new Map<string, Window>();
  const secondsLeft = (window: Window, now: number) => Math.max(1, Math.ceil((window.endsAt - now) / 1000));
  return {
    async reserve(account) {
      const now = Date.now();
      let window = windows.get(account);
      if (window === undefined || window.endsAt <= now) {
        windows.delete(account);
        if (windows.size >= MAX_TRACKED_ACCOUNTS) windows.delete(windows.keys().next().value!);
        window = { count: 0, endsAt: now + windowMs };
        windows.set(account, window);
      }
      if (window.count >= max) return { allowed: false, retryAfterSeconds: secondsLeft(window, now) };
      window.count += 1;
      return { allowed: true, retryAfterSeconds: secondsLeft(window, now) };
    },
    async release(account) {
      const window = windows.get(account);
      if (window !== undefined && window.count > 0) window.count -= 1;
    },
  };
}

// One script each, so that counting and refusing are one step for every instance sharing Redis.
const RESERVE = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if count > tonumber(ARGV[2]) then
  redis.call('DECR', KEYS[1])
  return {0, ttl}
end
return {1, ttl}`;
const RELEASE = `
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
return 0`;

/** The same counts kept in Redis for every instance. While Redis fails, logins go ahead, as every other limit does. */
export function loginAttemptsInRedis(redis: Redis, keyPrefix: string, max: number, windowMs: number): LoginAttempts {
  const key = (account: string) => `${keyPrefix}login-attempts:${account}`;
  return {
    async reserve(account) {
      try {
        const [allowed, ttlMs] = (await redis.eval(RESERVE, 1, key(account), windowMs, max)) as [number, number];
        return { allowed: allowed === 1, retryAfterSeconds: Math.max(1, Math.ceil(ttlMs / 1000)) };
      } catch {
        return { allowed: true, retryAfterSeconds: Math.ceil(windowMs / 1000) };
      }
    },
    async release(account) {
      await redis.eval(RELEASE, 1, key(account)).catch(() => {});
    },
  };
}
