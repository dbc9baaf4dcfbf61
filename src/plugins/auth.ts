import type { FastifyInstance, FastifyRequest } from 'fastify';
import { unauthorized } from '../errors.js';
import { findSignedInAccount, type Account } from '../modules/users/queries.js';

export type AuthMode = 'required' | 'optional';

export interface CurrentUser {
  account: Account;
  /** The token as the client sent it, handed back by GET /user. */
  token: string;
  sessionId: string;
  /** `content_version` as read with the account, before the route did anything: see readOnlyVersion. */
  contentVersion: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
  interface FastifyRequest {
    currentUser: CurrentUser | null;
  }
}

const SCHEME = /^(?:Token|Bearer) +([^\s]+) *$/i;

/**
 * Runs at onRequest, before the body is even read, so a missing or bad token is answered first (401 comes
 * before 422 in the contract). A token sent where auth is optional is checked just the same.
 */
export function installAuth(app: FastifyInstance): void {
  app.decorateRequest('currentUser', null);
  app.addHook('onRequest', async (request) => {
    const mode = request.routeOptions.config.auth;
    if (mode === undefined) return;
    const header = request.headers.authorization;
    if (header === undefined || header.trim() === '') {
      if (mode === 'required') throw unauthorized('is missing');
      return;
    }
    const token = SCHEME.exec(header)?.[1];
    if (token === undefined) throw unauthorized('is invalid');
    const claims = await app.tokens.verify(token);
    // Deleted users and revoked sessions fail here; the account is cached exactly (see findSignedInAccount).
    const found = await findSignedInAccount(app.db, claims.userId);
    const current = found && (found.account.token_version === claims.version || found.account.kept_session === claims.sessionId);
    if (!current) throw unauthorized('is invalid');
    request.currentUser = { account: found.account, token, sessionId: claims.sessionId, contentVersion: found.contentVersion };
  });
}

/** The signed-in user on a route declared with `auth: 'required'`. */
export function signedIn(request: FastifyRequest): CurrentUser {
  if (request.currentUser === null) throw new Error(`route ${request.url} reads the user without requiring auth`);
  return request.currentUser;
}

export const viewerId = (request: FastifyRequest): number | null => request.currentUser?.account.id ?? null;

/**
 * For read-only routes: the content version already read with the signed-in user's account, so the cached read
 * needs no second read; undefined when anonymous (the read then fetches it). A route that writes must not
 * use it: it predates the write, and would serve what the write has just changed as it was before.
 */
export const readOnlyVersion = (request: FastifyRequest): number | undefined => request.currentUser?.contentVersion;
