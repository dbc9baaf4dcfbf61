import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { describeEachDatabase, testConfig } from './support/app.js';
import { call, registerUser, type TestUser } from './support/client.js';

/**
 * Signed-in requests read their account from a per-process cache kept exact by `account_version`, which
 * triggers move. Each change here is made by hand in SQL, as an operator would, or through another app on the
 * same database, after this app has cached the account; the very next request must see it.
 */
describeEachDatabase('cached accounts after changes made elsewhere', (ctx) => {
  let other: FastifyInstance;
  const db = () => ctx().app.db;

  beforeAll(async () => {
    other = await buildApp(testConfig(ctx().databaseUrl), { migrate: false });
  });

  afterAll(() => other.close());

  /** Signs up and makes a signed-in request twice, so the account is cached. */
  async function cachedUser(): Promise<TestUser> {
    const user = await registerUser(ctx().app, 'cached');
    for (let i = 0; i < 2; i++) expect((await call(ctx().app, 'GET', '/api/user', { token: user.token })).status).toBe(200);
    return user;
  }

  it('refuses a token revoked by hand in SQL', async () => {
    const user = await cachedUser();
    await sql`update users set token_version = token_version + 1 where username = ${user.username}`.execute(db());
    expect((await call(ctx().app, 'GET', '/api/user', { token: user.token })).status).toBe(401);
  });

  it('refuses the token of a user deleted by hand in SQL', async () => {
    const user = await cachedUser();
    await sql`delete from users where username = ${user.username}`.execute(db());
    expect((await call(ctx().app, 'GET', '/api/articles/feed', { token: user.token })).status).toBe(401);
  });

  it('shows a bio changed by hand in SQL', async () => {
    const user = await cachedUser();
    await sql`update users set bio = ${'edited by hand'} where username = ${user.username}`.execute(db());
    expect((await call(ctx().app, 'GET', '/api/user', { token: user.token })).body.user.bio).toBe('edited by hand');
  });

  it("refuses another session's token at once after a password change made through another instance", async () => {
    const user = await cachedUser();
    const login = await call(ctx().app, 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });
    const otherSession: string = login.body.user.token;
    expect((await call(ctx().app, 'GET', '/api/user', { token: otherSession })).status).toBe(200);
    const changed = await call(other, 'PUT', '/api/user', { token: user.token, body: { user: { password: 'another-password-1' } } });
    expect(changed.status).toBe(200);
    expect((await call(ctx().app, 'GET', '/api/user', { token: otherSession })).status).toBe(401);
    expect((await call(ctx().app, 'GET', '/api/user', { token: changed.body.user.token })).status).toBe(200);
  });

  it('leaves cached accounts alone when only the counters on the user row move', async () => {
    const user = await cachedUser();
    const before = Number(
      (await sql<{ value: number }>`select value from counters where name = 'account_version'`.execute(db())).rows[0]!.value,
    );
    const article = await call(ctx().app, 'POST', '/api/articles', {
      token: user.token,
      body: { article: { title: `Counted ${user.username}`, description: 'd', body: 'b' } },
    });
    expect(article.status).toBe(201);
    const after = Number(
      (await sql<{ value: number }>`select value from counters where name = 'account_version'`.execute(db())).rows[0]!.value,
    );
    expect(after).toBe(before);
  });
});
