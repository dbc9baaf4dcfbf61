import { createHmac, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { claimKey, completeKey, findKey, type KeyClaim, oldestKeyAtLimit, purgeExpiredKeys, releaseKey } from '../db/idempotency-keys.js';
import { schedulePurge } from '../db/purge.js';
import { HttpError, rateLimited, unprocessable } from '../errors.js';
import { withHookAfter } from './route-hooks.js';

const KEY_HEADER = 'idempotency-key';
/** The name clients see in error bodies, as the header is spelled in the IETF draft. */
const FIELD = 'Idempotency-Key';
const MAX_KEY_LENGTH = 255;

/** How long a response stays replayable: a day outlasts any client's retries. */
export const KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;
/** No request here runs anywhere near a minute: a claim that old was left by a process that died. */
export const ABANDONED_AFTER_MS = 60 * 1000;
const PURGE_INTERVAL_MS = 10 * 60 * 1000;
const PURGE_BATCH = 1000;
/**
 * Keys one caller (an account, or an address for register and login) may hold within their lifetime: each is a row
 * kept a day, and the client picks how many it sends. Far above a real client's day of POSTs.
 */
export const KEYS_PER_CALLER = 1000;
/** A key can be released or purged between the failed claim and the read that follows; then it is claimed again. */
const CLAIM_ATTEMPTS = 3;

/**
 * For a route whose answer carries a secret (a token): what a key keeps of the answer, and how a replay is made
 * whole again, so that the table never holds a live credential.
 */
export interface SecretFreeReplay {
  /** The answer as stored. */
  stored(answer: string): string;
  /** The stored answer as this replay sends it; undefined when that is no longer possible, and the request runs afresh. */
  replayed(request: FastifyRequest, stored: string): Promise<string | undefined>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    secretFreeReplay?: SecretFreeReplay;
  }
  interface FastifyRequest {
    /** Set while this request holds an idempotency key, until its response is recorded or the key released. */
    idempotencyClaim: KeyClaim | null;
  }
}

const secretFree = (request: FastifyRequest) => request.routeOptions.config.secretFreeReplay;
const storedAnswer = (request: FastifyRequest, answer: string) => secretFree(request)?.stored(answer) ?? answer;

const inProgress = () => new HttpError(409, { [FIELD]: ['is being processed by another request'] });

/** JSON with every object's keys sorted: the same body with its keys in another order is the same request. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const members = Object.keys(record)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson(record[name])}`);
    return `{${members.join(',')}}`;
  }
  // An absent body reads as null, like the empty JSON body that favorite and follow accept.
  return JSON.stringify(value ?? null);
}

function keyOf(request: FastifyRequest): string | null {
  const value = request.headers[KEY_HEADER];
  if (value === undefined) return null;
  // Node joins repeated fields of this kind into one string; the whole of it is the key.
  const key = String(value);
  if (key.trim() === '') throw unprocessable(FIELD, "can't be blank");
  if (key.length > MAX_KEY_LENGTH) throw unprocessable(FIELD, `is too long (maximum is ${MAX_KEY_LENGTH} characters)`);
  return key;
}

/**
 * Whose keys these are. Anonymous callers (register, login) share a namespace per address, and only the same body
 * is ever replayed there; that body holds the password, so nobody without it can fetch the token in the response.
 */
const scopeOf = (request: FastifyRequest) => (request.currentUser === null ? `ip:${request.ip}` : `user:${request.currentUser.account.id}`);

/** Only POST routes take keys: PUT and DELETE are idempotent already, and the other routes skip both hooks. */
export const takesIdempotencyKey = (method: string | string[]): boolean => [method].flat().includes('POST');

/**
 * The Idempotency-Key header on POST routes (IETF draft "The Idempotency-Key HTTP Header Field"): a request repeated
 * with the same key gets the first one's response again, with `Idempotent-Replayed: true`, and runs only once.
 * Keys, claims and responses live only in the database, so this holds across instances and restarts.
 */
export function installIdempotency(app: FastifyInstance): void {
  // Keyed by a server secret: login and register bodies carry passwords, and a plain hash of them would be a cheap
  // offline guessing target for anyone who reads the table.
  const hashKey = createHmac('sha256', app.config.jwtSecret).update('idempotency request hash').digest();
  const requestHash = (request: FastifyRequest) =>
    createHmac('sha256', hashKey)
      .update(`${request.method} ${request.url.split('?', 1)[0]}\n${canonicalJson(request.body)}`)
      .digest('base64url');

  app.decorateRequest('idempotencyClaim', null);

  /** A new key past the caller's cap is refused until its oldest key expires; a key already held still replays. */
  const refuseBeyondCap = async (request: FastifyRequest, reply: FastifyReply, entry: KeyClaim) => {
    const oldest = await oldestKeyAtLimit(request.db, entry.scope, KEYS_PER_CALLER);
    if (oldest === undefined || (await findKey(request.db, entry.scope, entry.key)) !== undefined) return;
    reply.header('retry-after', Math.max(1, Math.ceil((oldest + KEY_LIFETIME_MS - Date.now()) / 1000)));
    throw rateLimited();
  };

  // preHandler: the token (401) and the request's shape (422) are judged before a key is looked at or taken.
  const claimOrReplay = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = keyOf(request);
    if (key === null) return;
    const entry: KeyClaim = { scope: scopeOf(request), key, requestHash: requestHash(request), claim: randomUUID() };
    await refuseBeyondCap(request, reply, entry);
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const now = Date.now();
      if (await claimKey(request.db, entry, now, { expired: now - KEY_LIFETIME_MS, abandoned: now - ABANDONED_AFTER_MS })) {
        request.idempotencyClaim = entry;
        return;
      }
      const held = await findKey(request.db, entry.scope, key);
      if (held === undefined) continue;
      if (held.request_hash !== entry.requestHash) throw unprocessable(FIELD, 'was already used with a different request');
      if (held.status === null || held.response === null) throw inProgress();
      const answer = await (secretFree(request)?.replayed(request, held.response) ?? held.response);
      if (answer === undefined) {
        await releaseKey(request.db, { scope: entry.scope, key, claim: held.claim });
        continue;
      }
      return reply.code(held.status).header('idempotent-replayed', 'true').type('application/json; charset=utf-8').send(answer);
    }
    throw inProgress();
  };

  // The response as it goes out, error bodies included. 4xx answers are deterministic and replayed like successes;
  // after a 5xx the key is let go, so the client's retry runs the request again.
  // A client that disconnects does not release its key: the handler goes on to the end, and the retry must
  // get the recorded response rather than run the request a second time.
  const record = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const entry = request.idempotencyClaim;
    if (entry === null) return payload;
    try {
      if (reply.statusCode >= 500) {
        await releaseKey(request.db, entry);
      } else if (!(await completeKey(request.db, entry, reply.statusCode, storedAnswer(request, String(payload ?? ''))))) {
        request.log.warn('idempotency key taken over while its request ran; its response is not recorded');
      }
    } catch (error) {
      // The answer is sent regardless; the key stays claimed until it counts as abandoned.
      request.log.error({ err: error }, 'could not record the idempotency key');
    }
    return payload;
  };

  app.addHook('onRoute', (route) => {
    if (!takesIdempotencyKey(route.method)) return;
    route.preHandler = withHookAfter(route.preHandler, claimOrReplay);
    route.onSend = withHookAfter(route.onSend, record);
  });

  // Expired keys are never replayed (a stale key is claimed afresh); purging only reclaims their space.
  schedulePurge(app, 'expired idempotency keys', PURGE_INTERVAL_MS, PURGE_BATCH, (limit) =>
    purgeExpiredKeys(app.db, Date.now() - KEY_LIFETIME_MS, limit),
  );
}
