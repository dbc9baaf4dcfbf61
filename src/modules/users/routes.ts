import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { decodeJwt } from 'jose';
import { uniqueViolation } from '../../db/constraints.js';
import type { Executor } from '../../db/index.js';
import { alreadyTaken, invalidCredentials, notFound, unauthorized } from '../../errors.js';
import { ifMatchPrecondition, strongTag } from '../../plugins/conditional-get.js';
import type { SecretFreeReplay } from '../../plugins/idempotency.js';
import { errorResponses, IfMatchHeaders, toIso } from '../../schemas.js';
import { signedIn } from './auth.js';
import { createKnownDevices } from './devices.js';
import { cancelDeletion, requestDeletion } from './leaving.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { purgeAccount } from './purge.js';
import {
  type Account,
  type AccountChanges,
  findLoginByEmail,
  findPasswordHash,
  findSignedInAccount,
  insertAccount,
  isUsernameTaken,
  updateAccount,
} from './queries.js';
import { DeleteUserBody, DeletionResponse, KnownDeviceHeaders, LoginBody, RegisterBody, UpdateUserBody, UserResponse } from './schemas.js';
import { canonicalUsername } from './username.js';

const toUser = (account: Account, token: string) => ({
  user: { email: account.email, token, username: account.username, bio: account.bio, image: account.image, role: account.role },
});

/**
 * The ETag of GET /user: the account as the answer shows it, without the token. The token is the request's own
 * credential handed back, different on every device and session; hashed in, two devices would never share a tag,
 * and a device that signed in again could not send If-Match with the copy it had. Vary: Authorization keeps caches
 * from handing one session's copy to another.
 */
const accountTag = (account: Account) =>
  strongTag(JSON.stringify([account.email, account.username, account.bio, account.image, account.role]));

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
    if (username !== undefined && uniqueViolation(error) === 'lookalike' && (await isUsernameTaken(db, username))) {
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
    // The account by its id alone, answered as it is at the replay: a stored answer holds no name or address that
    // would outlive the account's purge (purge.ts). Answers stored with the user's fields replay the same way.
    stored(answer) {
      const { user } = JSON.parse(answer) as { user?: { token: string } };
      if (user === undefined) return answer;
      return JSON.stringify({ account: Number(decodeJwt(user.token).sub) });
    },
    async replayed(request, stored) {
      const { account } = JSON.parse(stored) as { account?: number };
      if (account === undefined) return stored;
      const current = await findSignedInAccount(request.db, account);
      return current && JSON.stringify(toUser(current, await app.tokens.issue(current)));
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

  const devices = createKnownDevices(app.config.jwtSecret, app.config.knownDeviceTtlSeconds);
  app.post(
    '/users/login',
    {
      preHandler: [
        app.authLimits.countAttempt,
        // Only a well-signed device value costs a read here: a stranger's login is still refused before any.
        (request, reply) =>
          app.authLimits.reserveLogin(request, reply, () =>
            devices.recognise(request, () => findLoginByEmail(request.db, request.body.user.email)),
          ),
      ],
      config: { secretFreeReplay: withFreshToken },
      schema: {
        tags: ['users'],
        operationId: 'Login',
        summary: 'Log in',
        description:
          'A successful login answers a `Known-Device` header (and a cookie of the same value for the login route). ' +
          "Sent back at later logins, it lets this device past a lock that others' failed logins put on the account.",
        headers: KnownDeviceHeaders,
        body: LoginBody,
        response: { 200: UserResponse, ...errorResponses(401, 422, 429) },
      },
    },
    async (request, reply) => {
      const { email, password } = request.body.user;
      const login = await findLoginByEmail(request.db, email);
      // Unknown email and wrong password do the same work, keep their attempt and give the same answer.
      if (!(await verifyPassword(login?.password_hash, password)) || login === undefined) {
        throw invalidCredentials();
      }
      await app.authLimits.loginSucceeded(request);
      devices.remember(request, reply, login);
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

  app.delete(
    '/user',
    {
      config: { auth: 'required', whileLeaving: true, whileSuspended: true },
      schema: {
        tags: ['users'],
        operationId: 'DeleteCurrentUser',
        summary: 'Delete the account',
        description:
          'The account is hidden from everyone else at once, every other session is signed out, and everything it holds ' +
          'is purged at `purgeAt` unless `DELETE /api/user/deletion` cancels first. Asked again while pending: the same ' +
          '`purgeAt`, nothing changed.',
        body: DeleteUserBody,
        response: { 202: DeletionResponse, ...errorResponses(401, 422) },
      },
    },
    async (request, reply) => {
      const { account, sessionId } = signedIn(request);
      if (!(await verifyPassword(await findPasswordHash(request.db, account.id), request.body.user.password))) {
        throw invalidCredentials();
      }
      const purgeAt = await requestDeletion(request.db, account, sessionId, app.config.lifecycle.deletionGraceMs, Date.now());
      // Purged since its token was checked.
      if (purgeAt === undefined) throw unauthorized('is invalid');
      if (purgeAt <= Date.now()) {
        // No grace: purged before the answer. Should that fail, the account is gone for the API all the same, and
        // the next pass purges it.
        await purgeAccount(request.db, account.id, Date.now()).catch((error: unknown) =>
          request.log.warn({ err: error }, 'could not purge the account at once; the next pass will'),
        );
      }
      return reply.code(202).send({ deletion: { purgeAt: toIso(purgeAt) } });
    },
  );

  app.get(
    '/user/deletion',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['users'],
        operationId: 'GetCurrentUserDeletion',
        summary: "The account's pending deletion",
        description: 'So that a client signing in learns that the account is leaving, and can offer to cancel.',
        response: { 200: DeletionResponse, ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      const purgeAt = signedIn(request).account.purge_at;
      if (purgeAt === null) throw notFound('deletion');
      return { deletion: { purgeAt: toIso(purgeAt) } };
    },
  );

  app.delete(
    '/user/deletion',
    {
      config: { auth: 'required', whileLeaving: true, whileSuspended: true },
      schema: {
        tags: ['users'],
        operationId: 'CancelCurrentUserDeletion',
        summary: "Cancel the account's deletion",
        description:
          'Everything comes back as it was (sessions signed out by the deletion stay signed out); answers the user as ' +
          '`GET /api/user` does, also when no deletion was pending.',
        response: { 200: UserResponse, ...errorResponses(401) },
      },
    },
    async (request, reply) => {
      const { account, token } = signedIn(request);
      // Too late: the purge time came since the token was checked, and the account is gone.
      if (!(await cancelDeletion(request.db, account, Date.now()))) throw unauthorized('is invalid');
      reply.header('etag', accountTag(account));
      return toUser(account, token);
    },
  );
};
