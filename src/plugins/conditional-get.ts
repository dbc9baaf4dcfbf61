import { hash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import type { CachingConfig } from '../config.js';
import type { Executor } from '../db/index.js';
import type { Precondition } from '../db/transaction.js';
import { preconditionFailed } from '../errors.js';
import { withHookFirst } from './route-hooks.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** False for answers nobody may keep or revalidate (probes, metrics): `Cache-Control: no-store` and no ETag. */
    cacheable?: boolean;
  }
}

/** Characters of the base64url SHA-256 kept: 132 bits, far past any chance collision between two versions. */
const TAG_LENGTH = 22;

/** A strong entity tag for these exact bytes. */
export const strongTag = (bytes: string | Buffer): string => `"${hash('sha256', bytes, 'base64url').slice(0, TAG_LENGTH)}"`;

interface EntityTag {
  weak: boolean;
  /** The quoted opaque tag, as it appears in an ETag header. */
  opaque: string;
}

const ANY = '*';

/**
 * An If-Match or If-None-Match value: `*`, or its entity tags. A comma may sit inside a quoted tag (RFC 9110
 * allows it), so the list is scanned, not split; whatever does not parse as a tag is skipped and matches nothing.
 */
function parseEntityTags(header: string): typeof ANY | EntityTag[] {
  if (header.trim() === ANY) return ANY;
  const tags: EntityTag[] = [];
  const pattern = /(W\/)?("[^"]*")/g;
  for (let match = pattern.exec(header); match !== null; match = pattern.exec(header)) {
    tags.push({ weak: match[1] !== undefined, opaque: match[2]! });
  }
  return tags;
}

/**
 * Whether the header names the current tag. RFC 9110 13.1: If-None-Match compares weakly (a W/ prefix is ignored),
 * If-Match strongly (a weak tag never matches).
 */
function names(header: string, current: string, comparison: 'weak' | 'strong'): boolean {
  const tags = parseEntityTags(header);
  return tags === ANY || tags.some((tag) => tag.opaque === current && (comparison === 'weak' || !tag.weak));
}

/**
 * The request's If-Match as a check to run inside the write's transaction, after the row is locked: `currentTag`
 * reads the tag a GET by this requester would give now. Undefined without the header, and for `*` ("exists"), which
 * the write settles itself by answering 404 when the row is gone.
 */
export function ifMatchPrecondition(request: FastifyRequest, currentTag: (trx: Executor) => Promise<string>): Precondition | undefined {
  const header = request.headers['if-match'];
  if (header === undefined || parseEntityTags(header) === ANY) return undefined;
  return async (trx) => {
    if (!names(header, await currentTag(trx), 'strong')) throw preconditionFailed();
  };
}

/**
 * Sets Last-Modified, for a route whose whole answer changes only with a time it knows. The header has whole
 * seconds: a time in the current second is left out, or a change later in that second would carry the same
 * Last-Modified, and a client revalidating with If-Modified-Since would keep the older copy.
 */
export function setLastModified(reply: FastifyReply, ms: number): void {
  const second = Math.floor(ms / 1000);
  if (second < Math.floor(Date.now() / 1000)) reply.header('last-modified', new Date(second * 1000).toUTCString());
}

/** Vary with `Authorization` added to what is there already (CORS adds `Origin`). */
function varyOnAuthorization(reply: FastifyReply): void {
  const vary = reply.getHeader('vary');
  if (vary === undefined) {
    reply.header('vary', 'Authorization');
    return;
  }
  const names = String(vary)
    .split(',')
    .map((name) => name.trim().toLowerCase());
  if (!names.includes('authorization') && !names.includes('*')) reply.header('vary', `${vary}, Authorization`);
}

/** Unmodified since the client's If-Modified-Since, to the second, for a route that set Last-Modified. */
function notModifiedSince(request: FastifyRequest, reply: FastifyReply): boolean {
  const since = request.headers['if-modified-since'];
  const lastModified = reply.getHeader('last-modified');
  if (since === undefined || lastModified === undefined) return false;
  const sinceMs = Date.parse(since);
  return !Number.isNaN(sinceMs) && Date.parse(String(lastModified)) <= sinceMs;
}

/**
 * Conditional GET on every GET and HEAD route: a strong ETag on each successful answer with a body (the hash of the
 * bytes sent, unless the route set its own), `If-None-Match` and `If-Modified-Since` answered 304 without a body,
 * and Cache-Control that keeps per-user answers out of shared caches and has browsers revalidate every time. Streams
 * (the event stream) are left alone.
 * The hooks go on the read routes only: writes do not pay for them.
 */
export function installConditionalGet(app: FastifyInstance, config: CachingConfig): void {
  // Browsers honour stale-while-revalidate as CDNs do: in Cache-Control it showed users their own browser's copy from
  // before their write. So Cache-Control says max-age=0 (browsers revalidate every time) and s-maxage (read by shared
  // caches only), and serving stale copies is left to CDNs, in the fields only they read: CDN-Cache-Control (RFC
  // 9213) and Surrogate-Control (Fastly). A CDN that reads one ignores Cache-Control, so they repeat the freshness.
  const forCdns = `max-age=${config.sharedMaxAgeSeconds}, stale-while-revalidate=${config.staleWhileRevalidateSeconds}`;
  const sharedHeaders = {
    'cache-control': `public, max-age=0, s-maxage=${config.sharedMaxAgeSeconds}`,
    'cdn-cache-control': forCdns,
    'surrogate-control': forCdns,
  };

  const noStore: onSendHookHandler = async (_request, reply, payload) => {
    reply.header('cache-control', 'no-store');
    return payload;
  };

  const conditional: onSendHookHandler = async (request, reply, payload) => {
    const { auth } = request.routeOptions.config;
    // The answer depends on the token wherever the route reads one; elsewhere (tags) a token is ignored.
    if (auth !== undefined) varyOnAuthorization(reply);
    if (reply.statusCode < 200 || reply.statusCode >= 300) {
      // An error is about this moment (a 404 before the article exists, a 503), never worth keeping.
      if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
      return payload;
    }
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
    if (!reply.hasHeader('cache-control')) {
      if (auth === 'required' || request.currentUser !== null) reply.header('cache-control', 'private, no-cache');
      else reply.headers(sharedHeaders);
    }
    let etag = reply.getHeader('etag');
    if (etag === undefined) {
      etag = strongTag(payload);
      reply.header('etag', etag);
    }
    const noneMatch = request.headers['if-none-match'];
    // RFC 9110 13.2.2: If-Modified-Since counts only when there is no If-None-Match.
    const unchanged = noneMatch === undefined ? notModifiedSince(request, reply) : names(noneMatch, String(etag), 'weak');
    if (!unchanged) return payload;
    reply.code(304);
    reply.removeHeader('content-type');
    reply.removeHeader('content-length');
    // Fastify's HEAD handler, after this hook, drops the body and needs it to give the length a 200 would have.
    return request.method === 'HEAD' ? payload : null;
  };

  app.addHook('onRoute', (route) => {
    if (![route.method].flat().some((method) => method === 'GET' || method === 'HEAD')) return;
    // First of the route's own onSend hooks: a HEAD route's last one empties the body this hashes.
    route.onSend = withHookFirst(route.onSend, route.config?.cacheable === false ? noStore : conditional);
  });
}
