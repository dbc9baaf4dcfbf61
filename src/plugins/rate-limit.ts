import rateLimit, { type FastifyRateLimitStore, normalizeIP, type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config, RateLimitConfig } from '../config.js';
import { type HttpError, rateLimited } from '../errors.js';
import { identityKey } from '../identity.js';
import { READ_METHODS } from '../read-methods.js';
import { SettingError, systemProblem } from '../setting-error.js';
import { type Budget, budgetInRedis, budgetOn } from './budgets.js';
import { type PlaceCounter, placesInPrimary, placesInProcess, placesInRedis } from './held-places.js';
import { countersInPrimary, countersInProcess, type LimitCounters, type WindowCounter } from './limit-counters.js';
import { channelToPrimary } from './primary-channel.js';
import { withHookAfter } from './route-hooks.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Probes and scrapes: never rate-limited or shed, so load balancers and monitoring still see a busy instance. */
    exemptFromLimits?: boolean;
  }
  interface FastifyInstance {
    authLimits: AuthLimits;
    /** Where the live event streams a client holds open are counted, alongside the rate limits' counts. */
    streamPlaces: PlaceCounter;
  }
}

/** Brute-force guards for registration and login, each a no-op when its limit is 0. */
export interface AuthLimits {
  /** preHandler: every registration or login counts against the client address. */
  countAttempt(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /**
   * For login, before its password is checked: holds one of the account's attempts, or one of the device's when the
   * login comes from a device the account signed in from before (`knownDevice` names it; modules/users/devices.ts,
   * asked only while the limit is on), or refuses the login when failures and checks in flight have used them all.
   */
  reserveLogin(request: FastifyRequest, reply: FastifyReply, knownDevice: () => Promise<string | null>): Promise<void>;
  /** Gives a successful login's attempt back: only failures count. */
  loginSucceeded(request: FastifyRequest): Promise<void>;
}

/** Fastify's `trustProxy`: it takes a hop count too, though its types only know the equivalent function. */
export const trustProxyOption = (trust: Config['trustProxy']) =>
  typeof trust === 'number' ? (_address: string, hop: number) => hop < trust : trust;

export const isExemptFromLimits = (request: FastifyRequest): boolean => request.routeOptions.config.exemptFromLimits === true;

/** Stands for every client whose address is no longer known; no address is spelled like it. */
const GONE_CLIENT = 'gone';

/**
 * What the limits count a client's requests under: its address, an IPv6 one by its /64 as @fastify/rate-limit counts
 * it. A client that reset its connection before its request was handled has no address any more (Node can no longer
 * ask the socket, and Fastify's `request.ip` is undefined despite its type); the answers to such requests reach no
 * one, and they are counted together, so that a flood of them is limited and shed like any other.
 */
export const clientKey = (request: FastifyRequest): string => (request.ip === undefined ? GONE_CLIENT : normalizeIP(request.ip));

function refuse(reply: FastifyReply, retryAfterSeconds: number): HttpError {
  reply.header('retry-after', retryAfterSeconds);
  return rateLimited();
}

/**
 * Login bodies have passed validation by the time the account limit reads them. The account is named by the same key
 * the login looks it up by, so no spelling of one email (case, Unicode normal form) gets a counter of its own.
 */
const accountOf = (request: FastifyRequest) => identityKey((request.body as { user: { email: string } }).user.email);

async function connectRedis(app: FastifyInstance, url: string): Promise<Redis> {
  // Loaded only when configured: the client is the biggest module of the process (about 12 MB resident).
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    lazyConnect: true,
    // Every request waits on its counter: while Redis is away, commands fail at once (and the request passes)
    // instead of queueing until it is back.
    enableOfflineQueue: false,
    connectTimeout: 2000,
    commandTimeout: 500,
  });
  // ioredis rejects a failed connect with only "Connection is closed."; the 'error' event says why.
  let refusal: unknown;
  const noteRefusal = (error: unknown) => (refusal = error);
  redis.on('error', noteRefusal);
  try {
    // At start, so that a wrong REDIS_URL stops a deploy instead of leaving every instance without limits.
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    const cause = refusal ?? error;
    const { hostname, port } = new URL(url);
    throw new SettingError(
      'REDIS_URL',
      `cannot connect to Redis at ${hostname || 'localhost'}:${port || 6379} (${systemProblem(cause) ?? (cause as Error).message})`,
      'check the host and port, and that Redis is running; unset REDIS_URL to keep the counters in each process',
      { cause },
    );
  }
  redis.off('error', noteRefusal);
  redis.on('error', (error) => app.log.warn({ err: error }, 'Redis is unavailable: limits are not enforced until it is back'));
  // By onClose every request has finished, so no command is waiting for an answer.
  app.addHook('onClose', async () => redis.disconnect());
  return redis;
}

/**
 * What a write costs against its account's budget: one unit, and one more per 64 KiB of its body, so that the budget
 * bounds the bytes an account makes the server parse as well as its requests. An article of ordinary length costs
 * one unit, a 1 MiB body seventeen; a body whose size is known only once read (sent in chunks, or compressed) costs
 * as much as the largest one allowed.
 */
const WRITE_UNIT_BYTES = 64 * 1024;
function writeUnits(request: FastifyRequest): number {
  const { headers } = request;
  const announced = Number(headers['content-length']);
  const known = Number.isSafeInteger(announced) && announced > 0;
  const compressed = headers['content-encoding'] !== undefined && headers['content-encoding'].trim().toLowerCase() !== 'identity';
  const chunked = headers['transfer-encoding'] !== undefined && !known;
  let bytes = known ? announced : 0;
  if (compressed || chunked) bytes = request.routeOptions.bodyLimit;
  return 1 + Math.floor(bytes / WRITE_UNIT_BYTES);
}

/** The plugin compares the count with its `max` itself and counts refused requests too: its spends are never refused. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * @fastify/rate-limit's store over `counter`. The limiters made with `createRateLimit` share a second counter (their
 * keys name the limit, as they do in Redis), so that the general limit's keys never push theirs out.
 */
function storeOn(counters: LimitCounters, counter: WindowCounter) {
  return class implements FastifyRateLimitStore {
    incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number) {
      counter.spend(key, 1, UNBOUNDED, timeWindow).then((tally) => callback(null, { current: tally.spent, ttl: tally.ttlMs }), callback);
    }

    child(): FastifyRateLimitStore {
      const LimiterStore = storeOn(counters, counters('limiters'));
      return new LimiterStore();
    }
  };
}

/** Where every limit counts: the rate-limit plugin's options naming its store, the budgets by name, and the places. */
interface Counting {
  pluginStore: Pick<RateLimitPluginOptions, 'store' | 'redis' | 'nameSpace'>;
  budget(name: string, max: number, windowMs: number): Budget;
  places: PlaceCounter;
}

const countingIn = (counters: LimitCounters, places: PlaceCounter): Counting => ({
  pluginStore: { store: storeOn(counters, counters('requests')) },
  budget: (name, max, windowMs) => budgetOn(counters(name), max, windowMs),
  places,
});

/**
 * Where the counts live without Redis: in this process, or, in a WORKERS cluster, in the primary, which every worker
 * asks; otherwise each of N workers would let a client through N times as often.
 */
function countingInMemory(app: FastifyInstance, inPrimary: boolean): Counting {
  if (!inPrimary) return countingIn(countersInProcess(), placesInProcess());
  const channel = channelToPrimary(app.log);
  app.addHook('onClose', async () => channel.close());
  return countingIn(countersInPrimary(channel), placesInPrimary(channel));
}

// In Redis the budgets' keys (`writes:`, `login-attempts:`) keep them apart; the plugin files its limiters under one prefix.
function countingInRedis(app: FastifyInstance, redis: Redis, keyPrefix: string): Counting {
  const places = placesInRedis(redis, keyPrefix);
  app.addHook('onClose', async () => places.close());
  return {
    pluginStore: { redis, nameSpace: `${keyPrefix}rate-limit:` },
    budget: (_name, max, windowMs) => budgetInRedis(redis, keyPrefix, max, windowMs),
    places,
  };
}

/**
 * A general limit per client address on every route (in onRequest, before auth reads the database), a write budget
 * per signed-in account (before the body is read), the registration and login guards, and where the event streams a
 * client holds are counted (`streamPlaces`, for the events module). Counters live in this
 * process (in the cluster primary for every worker when `countInPrimary`), or in Redis when set so that every
 * instance shares them. A failing Redis or primary lets requests through: the limits protect the service, they must
 * not take it down. Returns the Redis client, for what else the instances share through it.
 */
export async function installRateLimits(app: FastifyInstance, config: RateLimitConfig, countInPrimary: boolean): Promise<Redis | null> {
  const redis = config.redisUrl === null ? null : await connectRedis(app, config.redisUrl);
  const counting = redis === null ? countingInMemory(app, countInPrimary) : countingInRedis(app, redis, config.redisKeyPrefix);
  app.decorate('streamPlaces', counting.places);
  await app.register(rateLimit, {
    global: false,
    max: config.max,
    timeWindow: config.windowMs,
    skipOnError: true,
    allowList: isExemptFromLimits,
    keyGenerator: clientKey,
    errorResponseBuilder: rateLimited,
    ...counting.pluginStore,
  });
  if (config.max > 0) app.addHook('onRequest', app.rateLimit());
  const budget = (name: string, max: number, windowMs: number) => (max === 0 ? null : counting.budget(name, max, windowMs));

  const writes = budget('writes', config.writeMax, config.windowMs);
  if (writes !== null) {
    // preParsing: after the token names the account, before the body is read, parsed or validated.
    const spendWriteBudget = async (request: FastifyRequest, reply: FastifyReply) => {
      if (READ_METHODS.has(request.method) || request.currentUser === null) return;
      const spending = await writes.spend(`writes:${request.currentUser.account.id}`, writeUnits(request));
      if (spending.allowed) return;
      // The body is still on its way: closing the connection spares reading (up to 1 MiB of) what will not be used.
      reply.header('connection', 'close');
      throw refuse(reply, spending.retryAfterSeconds);
    };
    // On the routes that write only, so that reads do not pay for a hook that has nothing to do for them.
    app.addHook('onRoute', (route) => {
      if ([route.method].flat().some((method) => !READ_METHODS.has(method))) {
        route.preParsing = withHookAfter(route.preParsing, spendWriteBudget);
      }
    });
  }

  // Keys say which limit they count: in Redis the plugin files both limiters under the same prefix.
  const limiter = (max: number, key: (request: FastifyRequest) => string) =>
    max > 0 ? app.createRateLimit({ max, timeWindow: config.authWindowMs, keyGenerator: key }) : null;
  const perAddress = limiter(config.authAddressMax, (request) => `address:${clientKey(request)}`);
  const logins = budget('logins', config.authAccountMax, config.authWindowMs);
  // The owner's devices count apart, so that strangers' failures never lock them out, each device on its own, so
  // that a stolen device value gives no more guesses than the account's own budget.
  const reservedLogins = new WeakMap<FastifyRequest, string>();

  app.decorate<AuthLimits>('authLimits', {
    async countAttempt(request, reply) {
      const state = await perAddress?.(request);
      if (state && !state.isAllowed && state.isExceeded) throw refuse(reply, state.ttlInSeconds);
    },
    async reserveLogin(request, reply, knownDevice) {
      if (logins === null) return;
      const device = await knownDevice();
      const key = device === null ? `login-attempts:${accountOf(request)}` : `device-login-attempts:${device}`;
      const spending = await logins.spend(key, 1);
      if (!spending.allowed) throw refuse(reply, spending.retryAfterSeconds);
      reservedLogins.set(request, key);
    },
    async loginSucceeded(request) {
      const key = reservedLogins.get(request);
      if (key !== undefined) await logins?.refund(key, 1);
    },
  });
  return redis;
}
