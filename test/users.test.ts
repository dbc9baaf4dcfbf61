import { describe, expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, registerUser, type TestUser, unique } from './support/client.js';

const BLANK = "can't be blank";
const TAKEN = 'has already been taken';
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]+$/;

describeEachDatabase('users', (ctx) => {
  const app = () => ctx().app;

  /** The stored row of a user, read straight from the database. */
  const userRow = (username: string) =>
    app().db.selectFrom('users').selectAll().where('username_key', '=', username.toLowerCase()).executeTakeFirstOrThrow();

  const login = (email: string, password: string) => call(app(), 'POST', '/api/users/login', { body: { user: { email, password } } });

  const update = (user: TestUser, changes: Record<string, unknown>, token = user.token) =>
    call(app(), 'PUT', '/api/user', { token, body: { user: changes } });

  const newIdentity = () => {
    const username = unique('id');
    return { username, email: `${username}@example.com` };
  };

  // ---------------------------------------------------------------- register

  it('registers a user and returns a token with null bio and image', async () => {
    const username = unique('reg');
    const response = await call(app(), 'POST', '/api/users', {
      body: { user: { username, email: `${username}@example.com`, password: 'password123' } },
    });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      user: { username, email: `${username}@example.com`, bio: null, image: null, role: 'user', token: expect.stringMatching(JWT_SHAPE) },
    });
  });

  it('keeps the email as it was typed at registration', async () => {
    const username = unique('case');
    const email = `${username.toUpperCase()}@Example.COM`;
    const response = await call(app(), 'POST', '/api/users', { body: { user: { username, email, password: 'password123' } } });
    expect(response.status).toBe(201);
    expect(response.body.user.email).toBe(email);
  });

  it('answers 409 for a username taken in another case', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'POST', '/api/users', {
      body: { user: { username: user.username.toUpperCase(), email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect(response.status).toBe(409);
    expect(response.body).toEqual({ errors: { username: [TAKEN] } });
  });

  it('answers 409 for an email taken in another case', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'POST', '/api/users', {
      body: { user: { username: unique('other'), email: user.email.toUpperCase(), password: 'password123' } },
    });
    expect(response.status).toBe(409);
    expect(response.body).toEqual({ errors: { email: [TAKEN] } });
  });

  it('answers 409 for an exact duplicate username and stores no second row', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'POST', '/api/users', {
      body: { user: { username: user.username, email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect(response.status).toBe(409);
    expect(response.body).toEqual({ errors: { username: [TAKEN] } });
    const rows = await app().db.selectFrom('users').select('id').where('username_key', '=', user.username.toLowerCase()).execute();
    expect(rows).toHaveLength(1);
  });

  it('lets exactly one of several simultaneous registrations of one name succeed; the rest get 409', async () => {
    const username = unique('race');
    const responses = await Promise.all(
      [0, 1, 2, 3].map((n) =>
        call(app(), 'POST', '/api/users', {
          body: {
            user: { username: n % 2 ? username : username.toUpperCase(), email: `${unique()}@example.com`, password: 'password123' },
          },
        }),
      ),
    );
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409]);
    for (const response of responses.filter((r) => r.status === 409)) {
      expect(response.body).toEqual({ errors: { username: [TAKEN] } });
    }
    const email = `${unique('race')}@example.com`;
    const sameEmail = await Promise.all(
      [0, 1, 2].map(() => call(app(), 'POST', '/api/users', { body: { user: { username: unique(), email, password: 'password123' } } })),
    );
    expect(sameEmail.map((response) => response.status).sort()).toEqual([201, 409, 409]);
    for (const response of sameEmail.filter((r) => r.status === 409)) {
      expect(response.body).toEqual({ errors: { email: [TAKEN] } });
    }
  });

  it('answers 422 "can\'t be blank" for every missing field at once', async () => {
    const response = await call(app(), 'POST', '/api/users', { body: { user: {} } });
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { username: [BLANK], email: [BLANK], password: [BLANK] } });
  });

  it('answers 422 "can\'t be blank" for null fields', async () => {
    const response = await call(app(), 'POST', '/api/users', { body: { user: { username: null, email: null, password: null } } });
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { username: [BLANK], email: [BLANK], password: [BLANK] } });
  });

  it('answers 422 "can\'t be blank" for empty and all-white-space fields', async () => {
    const empty = await call(app(), 'POST', '/api/users', { body: { user: { username: '', email: '', password: '' } } });
    expect(empty.status).toBe(422);
    expect(empty.body).toEqual({ errors: { username: [BLANK], email: [BLANK], password: [BLANK] } });

    const spaces = await call(app(), 'POST', '/api/users', { body: { user: { username: '   ', email: '  ', password: '         ' } } });
    expect(spaces.status).toBe(422);
    expect(spaces.body.errors.username).toEqual([BLANK]);
    expect(spaces.body.errors.email).toEqual([BLANK]);
  });

  it('answers 422 with one key per broken rule, all bad fields at once', async () => {
    const response = await call(app(), 'POST', '/api/users', {
      body: { user: { username: 'has space', email: 'not-an-email', password: 'short' } },
    });
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors).sort()).toEqual(['email', 'password', 'username']);
    for (const messages of Object.values(response.body.errors)) {
      expect(messages).toEqual([expect.any(String)]);
    }
    expect(response.body.errors.password[0]).toMatch(/8/);
  });

  it('answers 422 when the "user" wrapper is missing', async () => {
    const response = await call(app(), 'POST', '/api/users', {
      body: { username: unique(), email: `${unique()}@example.com`, password: 'password123' },
    });
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { user: [BLANK] } });
  });

  it('refuses a username with characters outside letters, digits, _, - and .', async () => {
    for (const username of ['white space', 'slash/name', 'at@sign', 'semi;colon']) {
      const response = await call(app(), 'POST', '/api/users', {
        body: { user: { username, email: `${unique()}@example.com`, password: 'password123' } },
      });
      expect(response.status, username).toBe(422);
      expect(Object.keys(response.body.errors), username).toEqual(['username']);
    }
  });

  it('accepts usernames with _, -, . and letters of other scripts', async () => {
    for (const username of [`${unique()}_a-b.c`, `zoë${unique()}`, `日本${unique()}`]) {
      const response = await call(app(), 'POST', '/api/users', {
        body: { user: { username, email: `${unique()}@example.com`, password: 'password123' } },
      });
      expect(response.status, username).toBe(201);
      expect(response.body.user.username).toBe(username);
    }
  });

  describe('lookalike names', () => {
    const registerAs = (username: string) =>
      call(app(), 'POST', '/api/users', { body: { user: { username, email: `${unique()}@example.com`, password: 'password123' } } });
    const LOOKALIKE = { errors: { username: ['looks too much like an existing username'] } };
    const RULE = { errors: { username: ['may contain only visible letters, digits, _, - and . (and not only dots)'] } };

    it('stores a fullwidth or ligature name as the letters it shows (NFKC), so it cannot pose as another', async () => {
      const base = unique('fw');
      const fullwidth = Array.from(base, (character) => String.fromCodePoint(character.codePointAt(0)! + 0xfee0)).join('');
      const created = await registerAs(fullwidth);
      expect([created.status, created.body.user.username]).toEqual([201, base]);
      expect((await registerAs(base)).body).toEqual({ errors: { username: ['has already been taken'] } });
      const ligature = await registerAs(`\ufb01${base}`);
      expect([ligature.status, ligature.body.user.username]).toEqual([201, `fi${base}`]);
    });

    it('refuses, with 409, a name that looks like an existing one in another script or another case', async () => {
      const tail = unique('').toLowerCase();
      const cases: Array<[string, string]> = [
        [`paypal${tail}`, `p\u0430yp\u0430l${tail}`], // Cyrillic a
        [`Ivan${tail}`, `lvan${tail}`], // capital I and small L
        [`jake${tail}`, `\u0458ake${tail}`], // Cyrillic je
        [`admin${tail}`, `adrnin${tail}`], // m and rn
        [`gau\u00df${tail}`, `gau\ua7d6${tail}`], // sharp s and Middle Scots S, a letter of Unicode 14 that Unicode 10's table lacked
      ];
      for (const [original, lookalike] of cases) {
        expect((await registerAs(original)).status, original).toBe(201);
        const refused = await registerAs(lookalike);
        expect([refused.status, refused.body], lookalike).toEqual([409, LOOKALIKE]);
      }
    });

    it("refuses on update a name that looks like someone else's, and allows a lookalike of one's own", async () => {
      const tail = unique('').toLowerCase();
      const owner = await registerUser(app(), 'x');
      expect((await update(owner, { username: `paypal${tail}` })).status).toBe(200);
      const other = await registerUser(app(), 'y');
      expect(await update(other, { username: `p\u0430ypal${tail}` })).toMatchObject({ status: 409, body: LOOKALIKE });
      const own = await update(owner, { username: `PayPal${tail}` });
      expect([own.status, own.body.user.username]).toEqual([200, `PayPal${tail}`]);
    });

    it('refuses invisible, unassigned and lone-surrogate characters, and names that NFKC turns into something refused', async () => {
      const base = unique('inv');
      // Hangul fillers (letters that show nothing), a combining grapheme joiner, a variation selector, an unassigned code point.
      for (const invisible of ['\u3164', '\u115f', '\u034f', '\ufe0f', '\u0378']) {
        const response = await registerAs(`${base}${invisible}`);
        expect([response.status, response.body], invisible.codePointAt(0)!.toString(16)).toEqual([422, RULE]);
      }
      expect(await registerAs(`${base}\u00bd`)).toMatchObject({ status: 422, body: RULE }); // ½ folds to 1⁄2
    });
  });

  it('enforces the username (64) and email (254) length limits', async () => {
    const longest = `${unique()}${'a'.repeat(64)}`.slice(0, 64);
    const ok = await call(app(), 'POST', '/api/users', {
      body: { user: { username: longest, email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect(ok.status).toBe(201);

    const tooLong = await call(app(), 'POST', '/api/users', {
      body: { user: { username: `${longest}b`, email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect(tooLong.status).toBe(422);
    expect(Object.keys(tooLong.body.errors)).toEqual(['username']);

    const longEmail = `${`${unique()}${'e'.repeat(250)}`.slice(0, 243)}@example.com`; // 255 characters
    expect(longEmail).toHaveLength(255);
    const emailTooLong = await call(app(), 'POST', '/api/users', {
      body: { user: { username: unique(), email: longEmail, password: 'password123' } },
    });
    expect(emailTooLong.status).toBe(422);
    expect(Object.keys(emailTooLong.body.errors)).toEqual(['email']);
  });

  it('accepts passwords of 8 and 256 characters and refuses 7 and 257 at registration', async () => {
    for (const [length, status] of [
      [7, 422],
      [8, 201],
      [256, 201],
      [257, 422],
    ] as const) {
      const { username, email } = newIdentity();
      const password = 'p'.repeat(length);
      const response = await call(app(), 'POST', '/api/users', { body: { user: { username, email, password } } });
      expect(response.status, `length ${length}`).toBe(status);
      if (status === 422) {
        expect(Object.keys(response.body.errors)).toEqual(['password']);
      } else {
        expect((await login(email, password)).status, `login with length ${length}`).toBe(200);
      }
    }
  });

  it('ignores unknown keys in the registration body', async () => {
    const { username, email } = newIdentity();
    const response = await call(app(), 'POST', '/api/users', {
      body: { user: { username, email, password: 'password123', token: 'forged', id: 1, token_version: 9, following: true }, admin: true },
    });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      user: { username, email, bio: null, image: null, role: 'user', token: expect.stringMatching(JWT_SHAPE) },
    });
    const row = await userRow(username);
    expect(row.token_version).toBe(0);
    expect(row.id).not.toBe(1);
  });

  it('stores passwords only as argon2id hashes', async () => {
    const user = await registerUser(app());
    const row = await userRow(user.username);
    expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/);
    expect(row.password_hash).not.toContain(user.password);

    // Two users with the same password get different salts.
    const other = await registerUser(app());
    expect((await userRow(other.username)).password_hash).not.toBe(row.password_hash);

    // And a changed password is hashed the same way.
    const changed = await update(user, { password: 'a-brand-new-password' });
    expect(changed.status).toBe(200);
    const after = await userRow(user.username);
    expect(after.password_hash).toMatch(/^\$argon2id\$v=19\$/);
    expect(after.password_hash).not.toBe(row.password_hash);
    expect(after.password_hash).not.toContain('a-brand-new-password');
  });

  // ---------------------------------------------------------------- login

  it('logs in and returns the user with a fresh token', async () => {
    const user = await registerUser(app());
    const response = await login(user.email, user.password);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      user: { username: user.username, email: user.email, bio: null, image: null, role: 'user', token: expect.stringMatching(JWT_SHAPE) },
    });
    const me = await call(app(), 'GET', '/api/user', { token: response.body.user.token });
    expect(me.status).toBe(200);
  });

  it('matches the email regardless of case at login and answers with the stored email', async () => {
    const { username } = newIdentity();
    const email = `${username}@Example.com`;
    const registered = await call(app(), 'POST', '/api/users', { body: { user: { username, email, password: 'password123' } } });
    expect(registered.status).toBe(201);
    for (const typed of [email.toUpperCase(), email.toLowerCase()]) {
      const response = await login(typed, 'password123');
      expect(response.status, typed).toBe(200);
      expect(response.body.user.email).toBe(email);
      expect(response.body.user.username).toBe(username);
    }
  });

  it('answers 422 for missing, null or blank login fields', async () => {
    const cases: Array<[unknown, Record<string, string[]>]> = [
      [{}, { email: [BLANK], password: [BLANK] }],
      [
        { email: null, password: null },
        { email: [BLANK], password: [BLANK] },
      ],
      [{ email: '', password: 'password123' }, { email: [BLANK] }],
      [{ email: 'someone@example.com', password: '' }, { password: [BLANK] }],
      [
        { email: '   ', password: '   ' },
        { email: [BLANK], password: [BLANK] },
      ],
    ];
    for (const [user, errors] of cases) {
      const response = await call(app(), 'POST', '/api/users/login', { body: { user } });
      expect(response.status, JSON.stringify(user)).toBe(422);
      expect(response.body, JSON.stringify(user)).toEqual({ errors });
    }
  });

  // ---------------------------------------------------------------- current user

  it('GET /user returns the current user with the token that was sent', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'GET', '/api/user', { token: user.token });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      user: { username: user.username, email: user.email, bio: null, image: null, role: 'user', token: user.token },
    });
  });

  it('PUT /user sets bio and image, and they persist', async () => {
    const user = await registerUser(app());
    const response = await update(user, { bio: 'I write things', image: 'https://example.com/me.png' });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      user: {
        username: user.username,
        email: user.email,
        bio: 'I write things',
        image: 'https://example.com/me.png',
        role: 'user',
        token: user.token,
      },
    });
    const me = await call(app(), 'GET', '/api/user', { token: user.token });
    expect(me.body.user).toMatchObject({ bio: 'I write things', image: 'https://example.com/me.png' });
  });

  it('PUT /user stores "" and null for bio and image as null', async () => {
    const user = await registerUser(app());
    for (const cleared of ['', null]) {
      expect((await update(user, { bio: 'Some bio', image: 'https://example.com/a.jpg' })).status).toBe(200);
      const response = await update(user, { bio: cleared, image: cleared });
      expect(response.status, JSON.stringify(cleared)).toBe(200);
      expect(response.body.user).toMatchObject({ bio: null, image: null });
      const row = await userRow(user.username);
      expect(row.bio, JSON.stringify(cleared)).toBeNull();
      expect(row.image, JSON.stringify(cleared)).toBeNull();
      const me = await call(app(), 'GET', '/api/user', { token: user.token });
      expect(me.body.user).toMatchObject({ bio: null, image: null });
    }
  });

  it('PUT /user changes only the fields it is given', async () => {
    const user = await registerUser(app());
    expect((await update(user, { bio: 'Kept bio', image: 'https://example.com/kept.png' })).status).toBe(200);
    const response = await update(user, { bio: 'New bio' });
    expect(response.status).toBe(200);
    expect(response.body.user).toEqual({
      username: user.username,
      email: user.email,
      bio: 'New bio',
      image: 'https://example.com/kept.png',
      role: 'user',
      token: user.token,
    });
    const empty = await update(user, {});
    expect(empty.status).toBe(200);
    expect(empty.body.user).toMatchObject({ bio: 'New bio', image: 'https://example.com/kept.png' });
  });

  it('PUT /user changes username and email; the new email logs in and the profile moves', async () => {
    const user = await registerUser(app());
    const next = newIdentity();
    const response = await update(user, next);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ user: { ...next, bio: null, image: null, role: 'user', token: user.token } });

    const me = await call(app(), 'GET', '/api/user', { token: user.token });
    expect(me.body.user).toMatchObject(next);

    expect((await login(next.email, user.password)).status).toBe(200);
    expect((await login(user.email, user.password)).status).toBe(401);
    expect((await call(app(), 'GET', `/api/profiles/${next.username}`)).status).toBe(200);
    expect((await call(app(), 'GET', `/api/profiles/${user.username}`)).status).toBe(404);
  });

  it('PUT /user lets a user change the case of their own username and email', async () => {
    const user = await registerUser(app());
    const response = await update(user, { username: user.username.toUpperCase(), email: user.email.toUpperCase() });
    expect(response.status).toBe(200);
    expect(response.body.user).toMatchObject({ username: user.username.toUpperCase(), email: user.email.toUpperCase() });
  });

  it('PUT /user answers 409 for a username or email taken by someone else, in any case', async () => {
    const user = await registerUser(app());
    const other = await registerUser(app());
    for (const username of [other.username, other.username.toUpperCase()]) {
      const response = await update(user, { username });
      expect(response.status, username).toBe(409);
      expect(response.body).toEqual({ errors: { username: [TAKEN] } });
    }
    for (const email of [other.email, other.email.toUpperCase()]) {
      const response = await update(user, { email });
      expect(response.status, email).toBe(409);
      expect(response.body).toEqual({ errors: { email: [TAKEN] } });
    }
    // Nothing changed.
    const me = await call(app(), 'GET', '/api/user', { token: user.token });
    expect(me.body.user).toMatchObject({ username: user.username, email: user.email });
  });

  it('PUT /user lets only one of two users take a free username at the same moment', async () => {
    const one = await registerUser(app());
    const two = await registerUser(app());
    const wanted = unique('wanted');
    const responses = await Promise.all([update(one, { username: wanted }), update(two, { username: wanted.toUpperCase() })]);
    expect(responses.map((response) => response.status).sort()).toEqual([200, 409]);
    expect(responses.find((response) => response.status === 409)?.body).toEqual({ errors: { username: [TAKEN] } });
    const holders = await app().db.selectFrom('users').select('id').where('username_key', '=', wanted.toLowerCase()).execute();
    expect(holders).toHaveLength(1);
  });

  it('PUT /user answers 409 without applying any part of the update', async () => {
    const user = await registerUser(app());
    const other = await registerUser(app());
    const response = await update(user, { username: other.username, bio: 'should not be stored' });
    expect(response.status).toBe(409);
    expect((await userRow(user.username)).bio).toBeNull();
  });

  it('PUT /user answers 422 for empty or null username and email', async () => {
    const user = await registerUser(app());
    for (const value of ['', null, '   ']) {
      for (const field of ['username', 'email']) {
        const response = await update(user, { [field]: value });
        expect(response.status, `${field}=${JSON.stringify(value)}`).toBe(422);
        expect(response.body, `${field}=${JSON.stringify(value)}`).toEqual({ errors: { [field]: [BLANK] } });
      }
    }
    const both = await update(user, { username: null, email: '' });
    expect(both.body).toEqual({ errors: { username: [BLANK], email: [BLANK] } });
    const row = await userRow(user.username);
    expect(row.email).toBe(user.email);
  });

  it('PUT /user answers 422 for a malformed email, username or image', async () => {
    const user = await registerUser(app());
    for (const [field, value] of [
      ['email', 'not-an-email'],
      ['username', 'bad name'],
      ['image', 'javascript:alert(1)'],
      ['bio', 42],
    ] as const) {
      const response = await update(user, { [field]: value });
      expect(response.status, field).toBe(422);
      expect(Object.keys(response.body.errors), field).toEqual([field]);
    }
  });

  it('PUT /user names a readable rule for a bad bio or image, never a half sentence', async () => {
    const user = await registerUser(app());
    const cases: Array<[string, unknown, string]> = [
      ['bio', 42, 'must be a string'],
      ['bio', 'x'.repeat(1001), 'is too long (maximum is 1000 characters)'],
      ['image', 'javascript:alert(1)', 'must be an http(s) URL'],
      ['image', 5, 'must be a string'],
    ];
    for (const [field, value, message] of cases) {
      const response = await update(user, { [field]: value });
      const label = `${field}=${JSON.stringify(value).slice(0, 20)}`;
      expect(response.status, label).toBe(422);
      expect(Object.keys(response.body.errors), label).toEqual([field]);
      const messages: string[] = response.body.errors[field];
      expect(messages, label).toContain(message);
      // Every message must read as a whole rule: no dangling "must be " left by the nullable half of the schema.
      for (const text of messages) expect(text, label).toMatch(/^\S.*[\w)]$/);
    }
  });

  it('PUT /user refuses passwords of 7 and 257 characters and accepts 8 and 256', async () => {
    const user = await registerUser(app());
    for (const length of [7, 257]) {
      const response = await update(user, { password: 'q'.repeat(length) });
      expect(response.status, `length ${length}`).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual(['password']);
      expect(response.body.errors.password).toEqual([expect.stringMatching(length === 7 ? /8/ : /256/)]);
    }
    // The refused passwords changed nothing.
    expect((await login(user.email, user.password)).status).toBe(200);

    let token = user.token;
    for (const length of [8, 256]) {
      const password = 'r'.repeat(length);
      const response = await update(user, { password }, token);
      expect(response.status, `length ${length}`).toBe(200);
      token = response.body.user.token;
      expect((await login(user.email, password)).status, `login with length ${length}`).toBe(200);
    }
  });

  it('PUT /user ignores unknown keys such as token and id', async () => {
    const user = await registerUser(app());
    const before = await userRow(user.username);
    const response = await update(user, {
      token: 'forged.token.value',
      id: before.id + 1000,
      token_version: 42,
      kept_session: 'someone',
      password_hash: 'plain',
      following: true,
      bio: 'Real change',
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      user: { username: user.username, email: user.email, bio: 'Real change', image: null, role: 'user', token: user.token },
    });
    const after = await userRow(user.username);
    expect(after).toMatchObject({ id: before.id, token_version: 0, kept_session: null, password_hash: before.password_hash });
    expect((await login(user.email, user.password)).status).toBe(200);
  });

  it('PUT /user answers 422 when the "user" wrapper is missing', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'PUT', '/api/user', { token: user.token, body: { bio: 'unwrapped' } });
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { user: [BLANK] } });
  });

  it('GET and PUT /user answer 401 "is missing" without a token', async () => {
    const get = await call(app(), 'GET', '/api/user');
    expect(get.status).toBe(401);
    expect(get.body).toEqual({ errors: { token: ['is missing'] } });
    const put = await call(app(), 'PUT', '/api/user', { body: { user: { bio: 'x' } } });
    expect(put.status).toBe(401);
    expect(put.body).toEqual({ errors: { token: ['is missing'] } });
  });
});
