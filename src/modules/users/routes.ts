import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { decodeJwt } from 'jose';
import { uniqueViolation } from '../../db/constraints.js';
import type { Executor } from '../../db/index.js';
import { alreadyTaken, invalidCredentials, unauthorized } from '../../errors.js';
import { ifMatchPrecondition, strongTag } from '../../plugins/conditional-get.js';
import type { SecretFreeReplay } from '../../plugins/idempotency.js';
import { errorResponses, IfMatchHeaders } from '../../schemas.js';
import { findProfile } from '../profiles/queries.js';
import { signedIn } from './auth.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { type Account, type AccountChanges, findLoginByEmail, findSignedInAccount, insertAccount, updateAccount } from './queries.js';
import { LoginBody, RegisterBody, UpdateUserBody, UserResponse } from './schemas.js';
import { canonicalUsername } from './username.js';

const toUser = (account: Account, token: string) => ({
  user: { email: account.email, token, username: account.username, bio: account.bio, image: account.image },
});

/**
 * The ETag of GET /user: the account as the answer shows it, without the token. The token is the request's own
 * credential handed back, different on every device and session; hashed in, two devices would never share a tag,
 * and a device that signed in again could not send If-Match with the copy it had. Vary: Authorization keeps caches
 * from handing one session's copy to another.
 */
const accountTag = (account: Account) => strongTag(JSON.stringify([account.email, account.username, account.bio, account.image]));

/** `""` clears a profile field, like `null`. */
const emptyToNull = (value: string | null | undefined) => (value === '' ? null : value);

/**
 * A name both taken and a lookalike breaks two unique keys, and which one a database names first varies; the
 * answer says "has already been taken" whenever it is, as the contract asks, and only then reads the table.
 */
async function namingTakenUsername<T>(db: Executor, username: string | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (username !== undefined && uniqueViolation(error) === 'lookalike' && (await findProfile(db, username, null))) {
      throw alreadyTaken('username');
    }
    throw error;
  }
}

export const usersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  /**
   * Register and login answers carry a token. An Idempotency-Key keeps them without it, naming the account instead,
   * and a replay gets a fresh token for that account, so the table never holds a live credential. A replay for an
   * account deleted since runs the request afresh.
   */
  const withFreshToken: SecretFreeReplay = {
    stored(answer) {
      const { user } = JSON.parse(answer) as { user?: { token: string } };
      if (user === undefined) return answer;
      const { token, ...rest } = user;
      return JSON.stringify({ user: rest, account: Number(decodeJwt(token).sub) });
    },
    async replayed(request, stored) {
      const { user, account } = JSON.parse(stored) as { user?: object; account?: number };
      if (account === undefined) return stored;
      const current = await findSignedInAccount(request.db, account);
      return current && JSON.stringify({ user: { ...user, token: await app.tokens.issue(current) } });
    },
  };

  app.post(
    '/users',
    {
      preHandler: app.authLimits.countAttempt,
      config: { secretFreeReplay: withFreshToken },
      schema: {
        tags: ['users'],
        operationId: 'CreateUser',
        summary: 'Register',
        body: RegisterBody,
        response: { 201: UserResponse, ...errorResponses(409, 422, 429) },
      },
    },
    async (request, reply) => {
      const { email, password } = request.body.user;
      const username = canonicalUsername(request.body.user.username);
      // A taken username or email, or a lookalike name, is settled by the unique keys, not by reading first.
      const passwordHash = await hashPassword(password);
      const account = await namingTakenUsername(request.db, username, () =>
        insertAccount(request.db, { username, email, passwordHash }, Date.now()),
      );
      return reply.code(201).send(toUser(account, await app.tokens.issue(account)));
    },
  );

  app.post(
    '/users/login',
    {
      preHandler: [app.authLimits.countAttempt, app.authLimits.reserveLogin],
      config: { secretFreeReplay: withFreshToken },
      schema: {
        tags: ['users'],
        operationId: 'Login',
        summary: 'Log in',
        body: LoginBody,
        response: { 200: UserResponse, ...errorResponses(401, 422, 429) },
      },
    },
    async (request) => {
      const { email, password } = request.body.user;
      const login = await findLoginByEmail(request.db, email);
      // Unknown email and wrong password do the same work, keep their attempt and give the same answer.
      if (!(await verifyPassword(login?.password_hash, password)) || login === undefined) {
        throw invalidCredentials();
      }
      await app.authLimits.loginSucceeded(request);
      return toUser(login, await app.tokens.issue(login));
    },
  );

  app.get(
    '/user',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['users'],
        operationId: 'GetCurrentUser',
        summary: 'Current user',
        response: { 200: UserResponse, ...errorResponses(401) },
      },
    },
    async (request, reply) => {
      const { account, token } = signedIn(request);
      reply.header('etag', accountTag(account));
      return toUser(account, token);
    },
  );

  app.put(
    '/user',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['users'],
        operationId: 'UpdateCurrentUser',
        summary: 'Update current user',
        headers: IfMatchHeaders,
        body: UpdateUserBody,
        response: { 200: UserResponse, ...errorResponses(401, 409, 412, 422) },
      },
    },
    async (request, reply) => {
      const { account, token, sessionId } = signedIn(request);
      const { email, password, bio, image } = request.body.user;
      const username = request.body.user.username === undefined ? undefined : canonicalUsername(request.body.user.username);
      const changes: AccountChanges = { username, email, bio: emptyToNull(bio), image: emptyToNull(image) };
      if (password !== undefined) {
        changes.password = { hash: await hashPassword(password), keptSession: sessionId };
      }
      const precondition = ifMatchPrecondition(request, async (trx) => {
        const current = await findSignedInAccount(trx, account.id);
        if (current === undefined) throw unauthorized('is invalid');
        return accountTag(current);
      });
      const updated = await namingTakenUsername(request.db, username, () =>
        updateAccount(request.db, account.id, changes, Date.now(), precondition),
      );
      // The new version's tag, so that the next edit can send If-Match without reading the account first.
      reply.header('etag', accountTag(updated));
      // After a password change every token is re-issued under the new version; the old one is kept only for
      // the session that made the change, so the client may keep using it while it switches over.
      return toUser(updated, password === undefined ? token : await app.tokens.issue(updated));
    },
  );
};
