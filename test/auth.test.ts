import { decodeJwt, SignJWT, UnsecuredJWT } from 'jose';
import { expect, it, vi } from 'vitest';
import { describeEachDatabase, TEST_SECRET } from './support/app.js';
import { call, createArticle, registerUser, type TestUser, unique } from './support/client.js';

const MISSING = { errors: { token: ['is missing'] } };
const INVALID = { errors: { token: ['is invalid'] } };
const EXPIRED = { errors: { token: ['has expired'] } };
const BAD_CREDENTIALS = { errors: { credentials: ['invalid'] } };

const secretKey = (secret = TEST_SECRET) => new TextEncoder().encode(secret);
const nowSeconds = () => Math.floor(Date.now() / 1000);

interface ForgedClaims {
  sub?: string;
  ver?: unknown;
  jti?: string;
  exp?: number;
  iat?: number;
}

/** Signs a token the way the server does (claims sub, ver, jti, exp), with any algorithm or secret. */
async function forge(claims: ForgedClaims, options: { alg?: string; secret?: string } = {}): Promise<string> {
  const payload: Record<string, unknown> = {};
  if (claims.ver !== undefined) payload.ver = claims.ver;
  const jwt = new SignJWT(payload).setProtectedHeader({ alg: options.alg ?? 'HS256', typ: 'JWT' });
  if (claims.sub !== undefined) jwt.setSubject(claims.sub);
  if (claims.jti !== undefined) jwt.setJti(claims.jti);
  jwt.setIssuedAt(claims.iat ?? nowSeconds());
  if (claims.exp !== undefined) jwt.setExpirationTime(claims.exp);
  return jwt.sign(secretKey(options.secret));
}

/** Valid claims for a user, to be spoiled one at a time by the tests. */
const claimsOf = (user: TestUser): Required<Omit<ForgedClaims, 'iat'>> => {
  const decoded = decodeJwt(user.token);
  return { sub: String(decoded.sub), ver: decoded.ver, jti: unique('jti'), exp: nowSeconds() + 3600 };
};

describeEachDatabase('auth', (ctx) => {
  const app = () => ctx().app;
  const me = (authorization?: string) => call(app(), 'GET', '/api/user', authorization === undefined ? {} : { headers: { authorization } });
  const login = (email: string, password: string) => call(app(), 'POST', '/api/users/login', { body: { user: { email, password } } });

  // ---------------------------------------------------------------- token carried by the server

  it('issues HS256 tokens carrying the user id, token version, a jti and a 30-day expiry', async () => {
    const user = await registerUser(app());
    const row = await app()
      .db.selectFrom('users')
      .select(['id', 'token_version'])
      .where('username_key', '=', user.username.toLowerCase())
      .executeTakeFirstOrThrow();
    const [header] = user.token.split('.');
    expect(JSON.parse(Buffer.from(header!, 'base64url').toString())).toMatchObject({ alg: 'HS256' });
    const claims = decodeJwt(user.token);
    expect(claims.sub).toBe(String(row.id));
    expect(claims.ver).toBe(row.token_version);
    expect(typeof claims.jti).toBe('string');
    const lifetime = (claims.exp ?? 0) - nowSeconds();
    expect(lifetime).toBeGreaterThan(30 * 86400 - 120);
    expect(lifetime).toBeLessThanOrEqual(30 * 86400);
  });

  it('accepts a token forged with the right secret and claims (the forging helper is sound)', async () => {
    const user = await registerUser(app());
    const response = await me(`Token ${await forge(claimsOf(user))}`);
    expect(response.status).toBe(200);
    expect(response.body.user.username).toBe(user.username);
  });

  // ---------------------------------------------------------------- 401 rows of the error table

  it('answers 401 "is missing" without an Authorization header', async () => {
    const response = await me();
    expect(response.status).toBe(401);
    expect(response.body).toEqual(MISSING);
  });

  it('answers 401 "is missing" on every route that needs a token', async () => {
    const author = await registerUser(app());
    const article = await createArticle(app(), author.token);
    const routes: Array<['GET' | 'POST' | 'PUT' | 'DELETE', string]> = [
      ['GET', '/api/user'],
      ['PUT', '/api/user'],
      ['GET', '/api/articles/feed'],
      ['POST', '/api/articles'],
      ['PUT', `/api/articles/${article.slug}`],
      ['DELETE', `/api/articles/${article.slug}`],
      ['POST', `/api/articles/${article.slug}/favorite`],
      ['DELETE', `/api/articles/${article.slug}/favorite`],
      ['POST', `/api/articles/${article.slug}/comments`],
      ['DELETE', `/api/articles/${article.slug}/comments/1`],
      ['POST', `/api/profiles/${author.username}/follow`],
      ['DELETE', `/api/profiles/${author.username}/follow`],
      ['GET', '/api/notifications'],
      ['POST', '/api/notifications/read'],
    ];
    for (const [method, url] of routes) {
      const response = await call(app(), method, url);
      expect(response.status, `${method} ${url}`).toBe(401);
      expect(response.body, `${method} ${url}`).toEqual(MISSING);
    }
  });

  it('answers 401 "is invalid" for malformed Authorization headers and tokens', async () => {
    for (const header of ['Token', 'Token not-a-jwt', 'Token a.b.c', 'Token abc def', 'Basic dXNlcjpwYXNz', 'eyJhbGciOiJIUzI1NiJ9.e30.x']) {
      const response = await me(header);
      expect(response.status, header).toBe(401);
      expect(response.body, header).toEqual(INVALID);
    }
  });

  it('answers 401 "is invalid" for a token signed with another secret', async () => {
    const user = await registerUser(app());
    const token = await forge(claimsOf(user), { secret: 'another-secret-that-is-also-long-enough-0123456789' });
    const response = await me(`Token ${token}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('answers 401 "is invalid" for a real token whose payload was altered', async () => {
    const user = await registerUser(app());
    const other = await registerUser(app());
    const [header, , signature] = user.token.split('.');
    const payload = Buffer.from(JSON.stringify({ ...decodeJwt(user.token), sub: decodeJwt(other.token).sub })).toString('base64url');
    const response = await me(`Token ${header}.${payload}.${signature}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('answers 401 "is invalid" for a token of a deleted user', async () => {
    const user = await registerUser(app());
    expect((await me(`Token ${user.token}`)).status).toBe(200);
    await app().db.deleteFrom('users').where('username_key', '=', user.username.toLowerCase()).execute();
    const response = await me(`Token ${user.token}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
    const optional = await call(app(), 'GET', '/api/articles', { token: user.token });
    expect(optional.status).toBe(401);
    expect(optional.body).toEqual(INVALID);
  });

  it('answers 401 "is invalid" for a well-signed token naming a user that never existed', async () => {
    const user = await registerUser(app());
    const response = await me(`Token ${await forge({ ...claimsOf(user), sub: '987654321' })}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('answers 401 "is invalid" for well-signed tokens with missing or wrong-typed claims', async () => {
    const user = await registerUser(app());
    const good = claimsOf(user);
    const spoiled: Array<[string, ForgedClaims]> = [
      ['no sub', { ...good, sub: undefined }],
      ['sub not a number', { ...good, sub: 'alice' }],
      ['sub zero', { ...good, sub: '0' }],
      ['no ver', { ...good, ver: undefined }],
      ['ver as text', { ...good, ver: String(good.ver) }],
      ['wrong ver', { ...good, ver: Number(good.ver) + 1 }],
      ['no jti', { ...good, jti: undefined }],
      ['no exp', { ...good, exp: undefined }],
    ];
    for (const [label, claims] of spoiled) {
      const response = await me(`Token ${await forge(claims)}`);
      expect(response.status, label).toBe(401);
      expect(response.body, label).toEqual(INVALID);
    }
  });

  it('answers 401 "has expired" for an expired token', async () => {
    const user = await registerUser(app());
    const token = await forge({ ...claimsOf(user), iat: nowSeconds() - 7200, exp: nowSeconds() - 60 });
    const response = await me(`Token ${token}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(EXPIRED);
  });

  it('refuses a token that was accepted before once it has expired', async () => {
    const user = await registerUser(app());
    const token = await forge({ ...claimsOf(user), exp: nowSeconds() + 60 });
    expect((await me(`Token ${token}`)).status).toBe(200);
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 61_000);
      const response = await me(`Token ${token}`);
      expect(response.status).toBe(401);
      expect(response.body).toEqual(EXPIRED);
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses a token with alg "none"', async () => {
    const user = await registerUser(app());
    const claims = claimsOf(user);
    const token = new UnsecuredJWT({ ver: claims.ver })
      .setSubject(claims.sub)
      .setJti(claims.jti)
      .setIssuedAt()
      .setExpirationTime(claims.exp)
      .encode();
    expect(token.endsWith('.')).toBe(true);
    const response = await me(`Token ${token}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('refuses an HS512 token signed with the right secret', async () => {
    const user = await registerUser(app());
    const token = await forge(claimsOf(user), { alg: 'HS512' });
    const response = await me(`Token ${token}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('refuses an HS256 token with its signature stripped', async () => {
    const user = await registerUser(app());
    const [header, payload] = user.token.split('.');
    const response = await me(`Token ${header}.${payload}.`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('accepts the "Bearer" scheme as well as "Token"', async () => {
    const user = await registerUser(app());
    for (const scheme of ['Token', 'Bearer']) {
      const response = await me(`${scheme} ${user.token}`);
      expect(response.status, scheme).toBe(200);
      expect(response.body.user).toMatchObject({ username: user.username, token: user.token });
    }
  });

  it('answers 401 for a bad token on routes where auth is optional, never anonymously', async () => {
    const user = await registerUser(app());
    const expired = await forge({ ...claimsOf(user), iat: nowSeconds() - 7200, exp: nowSeconds() - 60 });
    const article = await createArticle(app(), user.token);
    const urls = [
      '/api/articles',
      `/api/profiles/${user.username}`,
      '/api/profiles/nobody-here',
      `/api/articles/${article.slug}`,
      `/api/articles/${article.slug}/comments`,
    ];
    for (const url of urls) {
      const invalid = await call(app(), 'GET', url, { headers: { authorization: 'Token not.a.token' } });
      expect(invalid.status, url).toBe(401);
      expect(invalid.body, url).toEqual(INVALID);
      const old = await call(app(), 'GET', url, { token: expired });
      expect(old.status, url).toBe(401);
      expect(old.body, url).toEqual(EXPIRED);
    }
  });

  it('serves optional-auth routes anonymously when no token is sent', async () => {
    const user = await registerUser(app());
    expect((await call(app(), 'GET', '/api/articles')).status).toBe(200);
    const profile = await call(app(), 'GET', `/api/profiles/${user.username}`);
    expect(profile.status).toBe(200);
    expect(profile.body.profile.following).toBe(false);
  });

  it('checks the token before the body: 401 comes before 422', async () => {
    const noToken = await call(app(), 'POST', '/api/articles', { body: { article: { title: '' } } });
    expect(noToken.status).toBe(401);
    expect(noToken.body).toEqual(MISSING);

    const badToken = await call(app(), 'PUT', '/api/user', { headers: { authorization: 'Token bad' }, body: { user: { email: '' } } });
    expect(badToken.status).toBe(401);
    expect(badToken.body).toEqual(INVALID);

    const notJson = await app().inject({
      method: 'PUT',
      url: '/api/user',
      headers: { 'content-type': 'application/json' },
      payload: '{"user": {',
    });
    expect(notJson.statusCode).toBe(401);
    expect(JSON.parse(notJson.body)).toEqual(MISSING);
  });

  // ---------------------------------------------------------------- credentials

  it('answers the same 401 for a wrong password and an unknown email', async () => {
    const user = await registerUser(app());
    const wrongPassword = await login(user.email, 'not-the-password');
    const unknownEmail = await login(`${unique('ghost')}@example.com`, user.password);
    for (const response of [wrongPassword, unknownEmail]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual(BAD_CREDENTIALS);
    }
    expect(wrongPassword.headers['content-type']).toBe(unknownEmail.headers['content-type']);
  });

  it('takes a similar time for a wrong password and an unknown email', async () => {
    const user = await registerUser(app());
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const timed = async (email: string) => {
      const start = performance.now();
      const response = await login(email, 'not-the-password');
      expect(response.status).toBe(401);
      return performance.now() - start;
    };
    const wrong: number[] = [];
    const unknown: number[] = [];
    for (let round = 0; round < 5; round++) {
      wrong.push(await timed(user.email));
      unknown.push(await timed(`${unique('ghost')}@example.com`));
    }
    // A password check costs an argon2 verification; an unknown email must cost about the same, not ~nothing.
    expect(median(unknown)).toBeGreaterThan(median(wrong) * 0.3);
  });

  // ---------------------------------------------------------------- revocation

  it('revokes other sessions on a password change, keeps the one that made it, and issues a new token', async () => {
    const user = await registerUser(app());
    const tokenA = user.token;
    const second = await login(user.email, user.password);
    expect(second.status).toBe(200);
    const tokenB: string = second.body.user.token;
    expect(tokenB).not.toBe(tokenA);

    const change = await call(app(), 'PUT', '/api/user', { token: tokenA, body: { user: { password: 'a-new-password' } } });
    expect(change.status).toBe(200);
    const tokenC: string = change.body.user.token;
    expect(tokenC).not.toBe(tokenA);
    expect(tokenC).not.toBe(tokenB);

    const b = await me(`Token ${tokenB}`);
    expect(b.status).toBe(401);
    expect(b.body).toEqual(INVALID);
    // Revoked means revoked everywhere, also where auth is optional.
    expect((await call(app(), 'GET', '/api/articles', { token: tokenB })).status).toBe(401);

    const c = await me(`Token ${tokenC}`);
    expect(c.status).toBe(200);
    expect(c.body.user.token).toBe(tokenC);

    const a = await me(`Token ${tokenA}`);
    expect(a.status).toBe(200);
    expect(a.body.user.username).toBe(user.username);

    // The old password no longer logs in, the new one does.
    const old = await login(user.email, user.password);
    expect(old.status).toBe(401);
    expect(old.body).toEqual(BAD_CREDENTIALS);
    const fresh = await login(user.email, 'a-new-password');
    expect(fresh.status).toBe(200);
    const tokenD: string = fresh.body.user.token;
    expect((await me(`Token ${tokenD}`)).status).toBe(200);

    // A later change made with C revokes A (and D), keeps C.
    const again = await call(app(), 'PUT', '/api/user', { token: tokenC, body: { user: { password: 'a-third-password' } } });
    expect(again.status).toBe(200);
    const tokenE: string = again.body.user.token;
    for (const [name, token] of [
      ['A', tokenA],
      ['B', tokenB],
      ['D', tokenD],
    ] as const) {
      const response = await me(`Token ${token}`);
      expect(response.status, name).toBe(401);
      expect(response.body, name).toEqual(INVALID);
    }
    expect((await me(`Token ${tokenC}`)).status).toBe(200);
    expect((await me(`Token ${tokenE}`)).status).toBe(200);
  });

  it('keeps a token forged before a password change revoked even with a fresh expiry', async () => {
    const user = await registerUser(app());
    const before = claimsOf(user);
    const change = await call(app(), 'PUT', '/api/user', { token: user.token, body: { user: { password: 'another-password' } } });
    expect(change.status).toBe(200);
    // Same version as before the change, a jti that is not the kept session.
    const response = await me(`Token ${await forge({ ...before, jti: unique('other') })}`);
    expect(response.status).toBe(401);
    expect(response.body).toEqual(INVALID);
  });

  it('does not revoke tokens when the username, email, bio or image change', async () => {
    const user = await registerUser(app());
    const second = await login(user.email, user.password);
    const tokenB: string = second.body.user.token;
    const username = unique('renamed');
    const change = await call(app(), 'PUT', '/api/user', {
      token: user.token,
      body: { user: { username, email: `${username}@example.com`, bio: 'b', image: 'https://example.com/i.png' } },
    });
    expect(change.status).toBe(200);
    expect(change.body.user.token).toBe(user.token);
    for (const token of [user.token, tokenB]) {
      const response = await me(`Token ${token}`);
      expect(response.status).toBe(200);
      expect(response.body.user.username).toBe(username);
    }
    expect((await login(`${username}@example.com`, user.password)).status).toBe(200);
  });
});
