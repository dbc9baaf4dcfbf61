import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, registerUser, unique } from './support/client.js';

describeEachDatabase('users', (ctx) => {
  it('registers a user and returns a token with null bio and image', async () => {
    const username = unique('reg');
    const response = await call(ctx().app, 'POST', '/api/users', {
      body: { user: { username, email: `${username}@example.com`, password: 'password123' } },
    });
    expect(response.status).toBe(201);
    expect(response.body.user).toMatchObject({ username, email: `${username}@example.com`, bio: null, image: null });
    expect(typeof response.body.user.token).toBe('string');
  });

  it('answers 409 for a username taken in another case', async () => {
    const user = await registerUser(ctx().app);
    const response = await call(ctx().app, 'POST', '/api/users', {
      body: { user: { username: user.username.toUpperCase(), email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect(response.status).toBe(409);
    expect(response.body).toEqual({ errors: { username: ['has already been taken'] } });
  });
});
