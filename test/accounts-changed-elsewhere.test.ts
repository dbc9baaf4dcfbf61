import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { describeEachDatabase, testConfig } from './support/app.js';
import { call, registerUser, type TestUser } from './support/client.js';

/**
 * Each change here is made by hand in SQL, as an operator would, or through another app on the same database,
 * after this app has served the account twice; the very next request must see it.
 */
describeEachDatabase('signed-in accounts after changes made elsewhere', (ctx) => {
  let other: FastifyInstance;
  const db = () => ctx().app.db;

  beforeAll(async () => {
    other = await buildApp(testConfig(ctx().databaseUrl), { migrate: false });
  });

  afterAll(() => other.close());

  /** Signs up and makes a signed-in request twice. */
  async function servedUser(): Promise<TestUser> {
    const user = await registerUser(ctx().app, 'cached');
    for (let i = 0; i < 2; i++) expect((await call(ctx().app, 'GET', '/api/user', { token: user.token })).status).toBe(200);
    return user;
  }

  it('refuses a token revoked by hand in SQL', async () => {
    const user = await servedUser();
    await sql`update users set token_version = token_version + 1 where username = ${user.username}`.execute(db());
    expect((await call(ctx().app, 'GET', '/api/user', { token: user.token })).status).toBe(401);
  });

  it('refuses the token of a user deleted by hand in SQL', async () => {
    const user = await servedUser();
    await sql`delete from users where username = ${user.username}`.execute(db());
    expect((await call(ctx().app, 'GET', '/api/articles/feed', { token: user.token })).status).toBe(401);
  });

  it('shows a bio changed by hand in SQL', async () => {
    const user = await servedUser();
    await sql`update users set bio = ${'edited by hand'} where username = ${user.username}`.execute(db());
    expect((await call(ctx().app, 'GET', '/api/user', { token: user.token })).body.user.bio).toBe('edited by hand');
  });

  it("refuses another session's token at once after a password change made through another instance", async () => {
    const user = await servedUser();
    const login = await call(ctx().app, 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });
    const otherSession: string = login.body.user.token;
    expect((await call(ctx().app, 'GET', '/api/user', { token: otherSession })).status).toBe(200);
    const changed = await call(other, 'PUT', '/api/user', { token: user.token, body: { user: { password: 'another-password-1' } } });
    expect(changed.status).toBe(200);
    expect((await call(ctx().app, 'GET', '/api/user', { token: otherSession })).status).toBe(401);
    expect((await call(ctx().app, 'GET', '/api/user', { token: changed.body.user.token })).status).toBe(200);
  });
});
