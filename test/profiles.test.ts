import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, registerUser, type TestUser, unique } from './support/client.js';

const NOT_FOUND = { errors: { profile: ['not found'] } };
const MISSING = { errors: { token: ['is missing'] } };

describeEachDatabase('profiles', (ctx) => {
  const app = () => ctx().app;

  const profileOf = (user: TestUser, following: boolean, extra: { bio?: string | null; image?: string | null } = {}) => ({
    profile: { username: user.username, bio: null, image: null, following, ...extra },
  });

  /** A profile as a signed-in caller gets it: with whether they block and mute the user (CONTRACT.md, Moderation). */
  const viewedProfileOf = (user: TestUser, following: boolean) => ({
    profile: { ...profileOf(user, following).profile, blocking: false, muting: false },
  });

  const follow = (follower: TestUser, username: string) =>
    call(app(), 'POST', `/api/profiles/${encodeURIComponent(username)}/follow`, { token: follower.token });
  const unfollow = (follower: TestUser, username: string) =>
    call(app(), 'DELETE', `/api/profiles/${encodeURIComponent(username)}/follow`, { token: follower.token });

  /** Rows in the follows table between two users, read straight from the database. */
  const followRows = async (follower: TestUser, followed: TestUser) => {
    const id = async (user: TestUser) =>
      (await app().db.selectFrom('users').select('id').where('username_key', '=', user.username.toLowerCase()).executeTakeFirstOrThrow())
        .id;
    const rows = await app()
      .db.selectFrom('follows')
      .selectAll()
      .where('follower_id', '=', await id(follower))
      .where('followed_id', '=', await id(followed))
      .execute();
    return rows.length;
  };

  it('shows a profile to an anonymous reader with following false', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'GET', `/api/profiles/${user.username}`);
    expect(response.status).toBe(200);
    expect(response.body).toEqual(profileOf(user, false));
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('finds a profile by username regardless of case and answers with the stored spelling', async () => {
    const user = await registerUser(app(), 'MiXed');
    for (const typed of [user.username.toUpperCase(), user.username.toLowerCase()]) {
      const response = await call(app(), 'GET', `/api/profiles/${typed}`);
      expect(response.status, typed).toBe(200);
      expect(response.body, typed).toEqual(profileOf(user, false));
    }
  });

  it('finds a profile with a non-ASCII username, in any case and Unicode normal form', async () => {
    const username = `Zoë${unique('')}`;
    const registered = await call(app(), 'POST', '/api/users', {
      body: { user: { username, email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect(registered.status).toBe(201);
    for (const typed of [username, username.toUpperCase(), username.normalize('NFD'), username.toLowerCase().normalize('NFD')]) {
      const response = await call(app(), 'GET', `/api/profiles/${encodeURIComponent(typed)}`);
      expect(response.status, typed).toBe(200);
      expect(response.body.profile.username).toBe(username);
    }
  });

  it('shows bio and image once they are set', async () => {
    const user = await registerUser(app());
    await call(app(), 'PUT', '/api/user', { token: user.token, body: { user: { bio: 'Hello', image: 'https://example.com/a.png' } } });
    const response = await call(app(), 'GET', `/api/profiles/${user.username}`);
    expect(response.body).toEqual(profileOf(user, false, { bio: 'Hello', image: 'https://example.com/a.png' }));
  });

  it('answers 404 for an unknown profile on get, follow and unfollow', async () => {
    const viewer = await registerUser(app());
    const missing = unique('nobody');
    const responses = [
      await call(app(), 'GET', `/api/profiles/${missing}`),
      await call(app(), 'GET', `/api/profiles/${missing}`, { token: viewer.token }),
      await follow(viewer, missing),
      await unfollow(viewer, missing),
    ];
    for (const response of responses) {
      expect(response.status).toBe(404);
      expect(response.body).toEqual(NOT_FOUND);
    }
  });

  it('follows and unfollows, and the profile reflects it for the follower only', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());

    const followed = await follow(fan, star.username);
    expect(followed.status).toBe(200);
    expect(followed.body).toEqual(viewedProfileOf(star, true));
    expect(await followRows(fan, star)).toBe(1);

    expect((await call(app(), 'GET', `/api/profiles/${star.username}`, { token: fan.token })).body).toEqual(viewedProfileOf(star, true));
    expect((await call(app(), 'GET', `/api/profiles/${star.username}`)).body).toEqual(profileOf(star, false));
    const stranger = await registerUser(app());
    expect((await call(app(), 'GET', `/api/profiles/${star.username}`, { token: stranger.token })).body).toEqual(
      viewedProfileOf(star, false),
    );
    // Following is one-way.
    expect((await call(app(), 'GET', `/api/profiles/${fan.username}`, { token: star.token })).body).toEqual(viewedProfileOf(fan, false));
    expect(await followRows(star, fan)).toBe(0);

    const unfollowed = await unfollow(fan, star.username);
    expect(unfollowed.status).toBe(200);
    expect(unfollowed.body).toEqual(viewedProfileOf(star, false));
    expect(await followRows(fan, star)).toBe(0);
    expect((await call(app(), 'GET', `/api/profiles/${star.username}`, { token: fan.token })).body).toEqual(viewedProfileOf(star, false));
  });

  it('is idempotent: following twice and unfollowing twice stay consistent', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());
    for (let round = 0; round < 2; round++) {
      const response = await follow(fan, star.username);
      expect(response.status, `follow #${round + 1}`).toBe(200);
      expect(response.body).toEqual(viewedProfileOf(star, true));
      expect(await followRows(fan, star)).toBe(1);
    }
    for (let round = 0; round < 2; round++) {
      const response = await unfollow(fan, star.username);
      expect(response.status, `unfollow #${round + 1}`).toBe(200);
      expect(response.body).toEqual(viewedProfileOf(star, false));
      expect(await followRows(fan, star)).toBe(0);
    }
    // And following again after that works.
    expect((await follow(fan, star.username)).body).toEqual(viewedProfileOf(star, true));
    expect(await followRows(fan, star)).toBe(1);
  });

  it('stays consistent when the same follow arrives twice at once', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());
    const responses = await Promise.all([follow(fan, star.username), follow(fan, star.username), follow(fan, star.username)]);
    for (const response of responses) {
      expect(response.status).toBe(200);
      expect(response.body).toEqual(viewedProfileOf(star, true));
    }
    expect(await followRows(fan, star)).toBe(1);
  });

  it('follows by username regardless of case', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());
    const response = await follow(fan, star.username.toUpperCase());
    expect(response.status).toBe(200);
    expect(response.body).toEqual(viewedProfileOf(star, true));
    expect(await followRows(fan, star)).toBe(1);
    expect((await unfollow(fan, star.username.toUpperCase())).body).toEqual(viewedProfileOf(star, false));
    expect(await followRows(fan, star)).toBe(0);
  });

  it('answers 422 for following yourself, in any case, and stores nothing', async () => {
    const user = await registerUser(app());
    for (const typed of [user.username, user.username.toUpperCase()]) {
      const response = await follow(user, typed);
      expect(response.status, typed).toBe(422);
      expect(response.body).toEqual({ errors: { profile: ['cannot follow yourself'] } });
    }
    expect(await followRows(user, user)).toBe(0);
  });

  // PostgreSQL refuses a NUL character in any query: it is a 422 before the lookup, on both databases.
  it('answers 422 for a NUL character in the username, on reads and follows', async () => {
    const user = await registerUser(app());
    const NUL = { errors: { username: ['must not contain NUL characters'] } };
    expect((await call(app(), 'GET', `/api/profiles/${user.username}%00`)).body).toEqual(NUL);
    const response = await follow(user, `${user.username}\u0000`);
    expect(response.status).toBe(422);
    expect(response.body).toEqual(NUL);
  });

  it('answers 401 "is missing" for follow and unfollow without a token, before looking the user up', async () => {
    const star = await registerUser(app());
    for (const username of [star.username, unique('nobody')]) {
      for (const method of ['POST', 'DELETE'] as const) {
        const response = await call(app(), method, `/api/profiles/${username}/follow`);
        expect(response.status, `${method} ${username}`).toBe(401);
        expect(response.body).toEqual(MISSING);
      }
    }
  });

  it('accepts follow and unfollow sent with Content-Type: application/json and an empty body', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());
    for (const [method, following] of [
      ['POST', true],
      ['DELETE', false],
    ] as const) {
      const response = await app().inject({
        method,
        url: `/api/profiles/${star.username}/follow`,
        headers: { authorization: `Token ${fan.token}`, 'content-type': 'application/json' },
        payload: '',
      });
      expect(response.statusCode, method).toBe(200);
      expect(JSON.parse(response.body)).toEqual(viewedProfileOf(star, following));
    }
  });

  it('answers 401 for a bad token on the optional-auth profile route', async () => {
    const star = await registerUser(app());
    const response = await call(app(), 'GET', `/api/profiles/${star.username}`, { token: 'not.a.jwt' });
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
  });

  it('shows the new username on the profile after a rename, and follows survive it', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());
    await follow(fan, star.username);
    const renamed = unique('renamed');
    expect((await call(app(), 'PUT', '/api/user', { token: star.token, body: { user: { username: renamed } } })).status).toBe(200);
    const response = await call(app(), 'GET', `/api/profiles/${renamed}`, { token: fan.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      profile: { username: renamed, bio: null, image: null, following: true, blocking: false, muting: false },
    });
    expect((await call(app(), 'GET', `/api/profiles/${star.username}`)).status).toBe(404);
  });
});
