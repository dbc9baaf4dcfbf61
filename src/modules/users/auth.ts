import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { accountLeaving, accountSuspended, unauthorized } from '../../errors.js';
import { withHookAfter } from '../../plugins/route-hooks.js';
import { READ_METHODS } from '../../read-methods.js';
import { suspendedUntil } from '../moderation/roles.js';
import { screenedIds } from '../profiles/blocks.js';
import { type Account, findSignedInAccount } from './queries.js';

export type AuthMode = 'required' | 'optional';

export interface CurrentUser {
  account: Account;
  /** The token as the client sent it, handed back by GET /user. */
  token: string;
  /** Whom the account blocks, mutes or is blocked by (profiles/blocks.ts): read only when screened_count says any. */
  screened: readonly number[];
  sessionId: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
    /** A write an account that is leaving may still make: repeating or cancelling its deletion (leaving.ts). */
    whileLeaving?: boolean;
    /** A write a suspended account may still make: leaving, appealing, marking its notifications read. */
    whileSuspended?: boolean;
  }
  interface FastifyRequest {
    currentUser: CurrentUser | null;
  }
}

type SignedInAccount = NonNullable<Awaited<ReturnType<typeof findSignedInAccount>>>;

const SCHEME = /^(?:Token|Bearer) +([^\s]+) *$/i;

/**
 * Runs at onRequest, before the body is even read, so a missing or bad token is answered first (401 comes
 * before 422 in the contract). A token sent where auth is optional is checked just the same. Only routes that
 * declare `auth` get the hook: the others (tags, probes) do not pay for it on every request.
 */
export function installAuth(app: FastifyInstance): void {
  app.decorateRequest('currentUser', null);
  const authenticate = (mode: AuthMode) => async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (header === undefined || header.trim() === '') {
      if (mode === 'required') throw unauthorized('is missing');
      return;
    }
    const token = SCHEME.exec(header)?.[1];
    if (token === undefined) throw unauthorized('is invalid');
    const claims = await app.tokens.verify(token);
    await app.readRouting.forAccount(request, claims.userId);
    // Deleted users and revoked sessions fail here: the account is read afresh on every request.
    const isCurrent = (found: SignedInAccount | undefined): found is SignedInAccount =>
      found !== undefined && (found.token_version === claims.version || found.kept_session === claims.sessionId);
    let account = await findSignedInAccount(request.db, claims.userId);
    // A replica may not have replayed the registration or login that made this token yet: the primary has the last word.
    if (!isCurrent(account) && app.readRouting.toPrimary(request)) account = await findSignedInAccount(request.db, claims.userId);
    if (!isCurrent(account)) throw unauthorized('is invalid');
    const { screened, ...fields } = account;
    request.currentUser = { account: fields, token, sessionId: claims.sessionId, screened: screenedIds(screened) };
  };
  // A preHandler, so that a request is judged on its shape (422) before this refusal.
  const refuseLeaving = async (request: FastifyRequest) => {
    if (request.currentUser !== null && request.currentUser.account.purge_at !== null) throw accountLeaving();
  };
  const refuseSuspended = async (request: FastifyRequest) => {
    const until = request.currentUser === null ? undefined : suspendedUntil(request.currentUser.account, Date.now());
    if (until !== undefined) throw accountSuspended(until);
  };
  app.addHook('onRoute', (route) => {
    const mode = route.config?.auth;
    // Route hooks run after the app's own onRequest hooks (CORS, security headers, limits), as this one did.
    if (mode !== undefined) route.onRequest = withHookAfter(route.onRequest, authenticate(mode));
    if (refusesLeaving(route)) route.preHandler = withHookAfter(route.preHandler, refuseLeaving);
    if (refusesSuspended(route)) route.preHandler = withHookAfter(route.preHandler, refuseSuspended);
  });
}

/**
 * Whether the route answers an account that is leaving (leaving.ts) with 403: every signed-in write but those that
 * repeat or cancel its deletion. Reads stay open to it.
 */
export function refusesLeaving(route: Pick<RouteOptions, 'method' | 'config'>): boolean {
  return isSignedInWrite(route) && route.config?.whileLeaving !== true;
}

function isSignedInWrite(route: Pick<RouteOptions, 'method' | 'config'>): boolean {
  return route.config?.auth !== undefined && [route.method].flat().some((method) => !READ_METHODS.has(method));
}

/** Whether the route refuses a suspended account (403): every signed-in write but the few it may still make. */
export function refusesSuspended(route: Pick<RouteOptions, 'method' | 'config'>): boolean {
  return isSignedInWrite(route) && route.config?.whileSuspended !== true;
}

/** The signed-in user on a route declared with `auth: 'required'`. */
export function signedIn(request: FastifyRequest): CurrentUser {
  if (request.currentUser === null) throw new Error(`route ${request.url} reads the user without requiring auth`);
  return request.currentUser;
}

export const viewerId = (request: FastifyRequest): number | null => request.currentUser?.account.id ?? null;
