import { once } from 'node:events';
import { connect } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { purgeExpiredKeys } from '../src/db/idempotency-keys.js';
import { ABANDONED_AFTER_MS, KEY_LIFETIME_MS, KEYS_PER_CALLER } from '../src/plugins/idempotency.js';
import { createScratchDatabase, describeEachDatabase, testConfig } from './support/app.js';
import { type ApiResponse, call, createArticle, registerUser, unique } from './support/client.js';

const REPLAYED = 'idempotent-replayed';

/** A POST carrying an Idempotency-Key. */
const post = (app: FastifyInstance, url: string, key: string, options: { token?: string; body?: unknown } = {}) =>
  call(app, 'POST', url, { ...options, headers: { 'idempotency-key': key } });

const newArticle = () => ({ article: { title: unique('Idem '), description: 'd', body: 'b', tagList: ['idem'] } });

/** What the client saw: a replay must match the first answer in all of it. */
const seen = (response: ApiResponse) => ({ status: response.status, body: response.body });
const outcome = (response: ApiResponse) => [response.status, response.body, response.headers[REPLAYED]];

describeEachDatabase('Idempotency-Key', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  const articlesBy = async (username: string) =>
    (await call(app(), 'GET', `/api/articles?author=${username}`)).body.articlesCount as number;

  /** The key's row, straight from the table. */
  const keyRow = (key: string) => db().selectFrom('idempotency_keys').selectAll().where('key', '=', key).executeTakeFirst();

  /** Moves a key's claim into the past, as if it had been taken that long ago. */
  const age = (key: string, ms: number, changes: { status?: null; response?: null } = {}) =>
    db()
      .updateTable('idempotency_keys')
      .set({ created_at: Date.now() - ms, ...changes })
      .where('key', '=', key)
      .execute();

  /** A fresh database of the kind under test, for apps of a test's own. */
  async function onScratchDatabase(work: (url: string) => Promise<void>) {
    const scratch = await createScratchDatabase(ctx().kind);
    try {
      await work(scratch.url);
    } finally {
      await scratch.drop();
    }
  }

  /** An app with one more route, POST /api/run, that counts its runs; `step` is where a run fails or waits. */
  async function withCountingRoute(
    step: (run: number, request: FastifyRequest) => Promise<void>,
    work: (app: FastifyInstance, runs: () => number) => Promise<void>,
  ) {
    await onScratchDatabase(async (url) => {
      const counting = await buildApp(testConfig(url));
      let runs = 0;
      counting.post('/api/run', async (request) => {
        runs += 1;
        await step(runs, request);
        return { runs };
      });
      try {
        await work(counting, () => runs);
      } finally {
        await counting.close();
      }
    });
  }

  it('replays the first response to a repeated create, with Idempotent-Replayed, and creates one article', async () => {
    const author = await registerUser(app(), 'idem');
    const key = unique('key-');
    const body = newArticle();
    const first = await post(app(), '/api/articles', key, { token: author.token, body });
    expect(first.status).toBe(201);
    expect(first.headers[REPLAYED]).toBeUndefined();

    const again = await post(app(), '/api/articles', key, { token: author.token, body });
    expect(seen(again)).toEqual(seen(first));
    expect(again.headers[REPLAYED]).toBe('true');
    expect(again.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(await articlesBy(author.username)).toBe(1);
  });

  it('the same body with its keys in another order is the same request', async () => {
    const author = await registerUser(app(), 'idem');
    const key = unique('key-');
    const { title, description, body, tagList } = newArticle().article;
    const first = await post(app(), '/api/articles', key, {
      token: author.token,
      body: { article: { title, description, body, tagList } },
    });
    const again = await post(app(), '/api/articles', key, {
      token: author.token,
      body: { article: { tagList, body, description, title } },
    });
    expect(again.headers[REPLAYED]).toBe('true');
    expect(seen(again)).toEqual(seen(first));
    expect(await articlesBy(author.username)).toBe(1);
  });

  it('posts a comment once however often it is retried', async () => {
    const author = await registerUser(app(), 'idem');
    const article = await createArticle(app(), author.token);
    const key = unique('key-');
    const url = `/api/articles/${article.slug}/comments`;
    const body = { comment: { body: 'Once only' } };
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await post(app(), url, key, { token: author.token, body }));
    expect(responses.map((response) => [response.status, response.headers[REPLAYED]])).toEqual([
      [201, undefined],
      [201, 'true'],
      [201, 'true'],
    ]);
    for (const response of responses) expect(response.body).toEqual(responses[0]!.body);
    expect((await call(app(), 'GET', url)).body.comments).toHaveLength(1);
  });

  it('replays a favorite as it was answered, not as it would be now', async () => {
    const author = await registerUser(app(), 'idem');
    const [a, b] = [await registerUser(app(), 'fan'), await registerUser(app(), 'fan')];
    const article = await createArticle(app(), author.token);
    const url = `/api/articles/${article.slug}/favorite`;
    const key = unique('key-');
    const first = await post(app(), url, key, { token: a.token });
    expect(first.body.article.favoritesCount).toBe(1);
    await call(app(), 'POST', url, { token: b.token });

    const again = await post(app(), url, key, { token: a.token });
    expect(again.headers[REPLAYED]).toBe('true');
    expect(seen(again)).toEqual(seen(first));
    expect((await call(app(), 'GET', `/api/articles/${article.slug}`)).body.article.favoritesCount).toBe(2);
  });

  it('answers 422 when the key comes back with another body or another URL', async () => {
    const author = await registerUser(app(), 'idem');
    const key = unique('key-');
    expect((await post(app(), '/api/articles', key, { token: author.token, body: newArticle() })).status).toBe(201);
    const reused = { status: 422, body: { errors: { 'Idempotency-Key': ['was already used with a different request'] } } };
    expect(seen(await post(app(), '/api/articles', key, { token: author.token, body: newArticle() }))).toEqual(reused);

    const article = await createArticle(app(), author.token);
    expect(seen(await post(app(), `/api/articles/${article.slug}/favorite`, key, { token: author.token }))).toEqual(reused);
    expect(await articlesBy(author.username)).toBe(2);
  });

  it('runs identical requests sent at once exactly once: the others get 409 or the replay', async () => {
    const author = await registerUser(app(), 'idem');
    const key = unique('key-');
    const body = newArticle();
    const responses = await Promise.all(Array.from({ length: 6 }, () => post(app(), '/api/articles', key, { token: author.token, body })));
    const executed = responses.filter((response) => response.status === 201 && response.headers[REPLAYED] === undefined);
    expect(executed).toHaveLength(1);
    for (const response of responses) {
      if (response === executed[0]) continue;
      if (response.status === 409) {
        expect(response.body).toEqual({ errors: { 'Idempotency-Key': ['is being processed by another request'] } });
      } else {
        expect(response.headers[REPLAYED]).toBe('true');
        expect(seen(response)).toEqual(seen(executed[0]!));
      }
    }
    expect(await articlesBy(author.username)).toBe(1);
  });

  it('keeps keys per caller: another user sending the same key runs their own request', async () => {
    const [a, b] = [await registerUser(app(), 'idem'), await registerUser(app(), 'idem')];
    const key = unique('key-');
    const body = newArticle();
    const first = await post(app(), '/api/articles', key, { token: a.token, body });
    const other = await post(app(), '/api/articles', key, { token: b.token, body });
    expect(other.headers[REPLAYED]).toBeUndefined();
    expect([first.status, other.status]).toEqual([201, 201]);
    expect(other.body.article.author.username).toBe(b.username);
    expect([await articlesBy(a.username), await articlesBy(b.username)]).toEqual([1, 1]);
  });

  it('replays a registration only to the same address with the same body', async () => {
    const username = unique('anon');
    const payload = { user: { username, email: `${username}@example.com`, password: 'password123' } };
    const register = async (remoteAddress: string, key: string, user = payload) => {
      const response = await app().inject({
        method: 'POST',
        url: '/api/users',
        remoteAddress,
        headers: { 'idempotency-key': key },
        payload: user,
      });
      return { status: response.statusCode, body: response.json(), replayed: response.headers[REPLAYED] };
    };
    const key = unique('key-');
    const first = await register('198.51.100.7', key);
    expect(first.status).toBe(201);
    // The same answer, with a token of its own: the table keeps no token to replay.
    const replay = await register('198.51.100.7', key);
    expect(replay).toEqual({ ...first, replayed: 'true', body: { user: { ...first.body.user, token: expect.any(String) } } });
    expect(replay.body.user.token).not.toBe(first.body.user.token);
    const me = await call(app(), 'GET', '/api/user', { token: replay.body.user.token });
    expect([me.status, me.body.user.username]).toEqual([200, username]);
    expect((await keyRow(key))!.response).not.toContain(first.body.user.token);
    // From elsewhere the key is unknown: the request runs, and the account exists already.
    const elsewhere = await register('203.0.113.9', key);
    expect([elsewhere.status, elsewhere.replayed]).toEqual([409, undefined]);
    // Someone who guessed the key but not the password gets no token.
    const guess = { user: { ...payload.user, password: 'not-the-password' } };
    expect((await register('198.51.100.7', key, guess)).status).toBe(422);
  });

  it('keeps no token of a login, and runs a replay afresh once the account is gone', async () => {
    const user = await registerUser(app(), 'keyed');
    const login = (key: string) =>
      call(app(), 'POST', '/api/users/login', {
        headers: { 'idempotency-key': key },
        body: { user: { email: user.email, password: user.password } },
      });
    const key = unique('key-');
    const first = await login(key);
    expect(first.status).toBe(200);
    const stored = (await keyRow(key))!.response!;
    expect(stored).not.toContain(first.body.user.token);
    expect(stored).not.toContain('token');
    const replay = await login(key);
    expect(replay.headers[REPLAYED]).toBe('true');
    expect(replay.body.user.username).toBe(user.username);
    expect((await call(app(), 'GET', '/api/user', { token: replay.body.user.token })).status).toBe(200);

    await db().deleteFrom('users').where('username', '=', user.username).execute();
    const afterDeletion = await login(key);
    expect([afterDeletion.status, afterDeletion.headers[REPLAYED]]).toEqual([401, undefined]);
  });

  it(`holds at most ${KEYS_PER_CALLER} keys per caller: a new one past that is 429 until the oldest expires`, async () => {
    const user = await registerUser(app(), 'hoarder');
    const { id } = await db().selectFrom('users').select('id').where('username', '=', user.username).executeTakeFirstOrThrow();
    const article = await createArticle(app(), user.token);
    const favorite = (key: string) =>
      call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: user.token, headers: { 'idempotency-key': key } });
    const kept = unique('kept-');
    expect((await favorite(kept)).status).toBe(200);
    // The rest of the cap, as if sent over the last hour: writing them through the API would take a while.
    const created_at = Date.now() - 60 * 60 * 1000;
    const rows = Array.from({ length: KEYS_PER_CALLER - 1 }, (_, i) => ({
      scope: `user:${id}`,
      key: `filler-${i}`,
      request_hash: 'filler',
      claim: `claim-${i}`,
      status: 200,
      response: '{}',
      created_at,
    }));
    for (let start = 0; start < rows.length; start += 100) {
      await db()
        .insertInto('idempotency_keys')
        .values(rows.slice(start, start + 100))
        .execute();
    }
    const refused = await favorite(unique('one-more-'));
    expect([refused.status, refused.body]).toEqual([429, { errors: { rate: ['limit exceeded'] } }]);
    // The oldest key expires in 23 hours.
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(22 * 60 * 60);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(23 * 60 * 60);
    // With a key it holds, or without one, the caller goes on as before; another caller is not affected.
    const replayed = await favorite(kept);
    expect([replayed.status, replayed.headers[REPLAYED]]).toEqual([200, 'true']);
    expect((await call(app(), 'DELETE', `/api/articles/${article.slug}/favorite`, { token: user.token })).status).toBe(200);
    const other = await registerUser(app(), 'other');
    const otherArticle = await createArticle(app(), other.token);
    const fresh = await call(app(), 'POST', `/api/articles/${otherArticle.slug}/favorite`, {
      token: other.token,
      headers: { 'idempotency-key': unique('k-') },
    });
    expect(fresh.status).toBe(200);
  });

  it('replays a 4xx too: the answer stands even after the article appears', async () => {
    const author = await registerUser(app(), 'idem');
    const title = unique('Ghost ');
    const slug = title.toLowerCase().replace(' ', '-');
    const key = unique('key-');
    const missing = await post(app(), `/api/articles/${slug}/favorite`, key, { token: author.token });
    expect(seen(missing)).toEqual({ status: 404, body: { errors: { article: ['not found'] } } });

    expect((await createArticle(app(), author.token, { title })).slug).toBe(slug);
    const again = await post(app(), `/api/articles/${slug}/favorite`, key, { token: author.token });
    expect(again.headers[REPLAYED]).toBe('true');
    expect(seen(again)).toEqual(seen(missing));
    expect((await call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: author.token })).status).toBe(200);
  });

  it('checks the key after the token and the body: 401, then 422 for the body, then 422 for the key', async () => {
    const author = await registerUser(app(), 'idem');
    const tooLong = 'k'.repeat(256);
    expect((await post(app(), '/api/articles', tooLong, { body: newArticle() })).status).toBe(401);
    expect((await post(app(), '/api/articles', tooLong, { token: author.token, body: { article: {} } })).body.errors).not.toHaveProperty(
      'Idempotency-Key',
    );
    expect(seen(await post(app(), '/api/articles', tooLong, { token: author.token, body: newArticle() }))).toEqual({
      status: 422,
      body: { errors: { 'Idempotency-Key': ['is too long (maximum is 255 characters)'] } },
    });
    expect(seen(await post(app(), '/api/articles', '', { token: author.token, body: newArticle() }))).toEqual({
      status: 422,
      body: { errors: { 'Idempotency-Key': ["can't be blank"] } },
    });
    expect((await post(app(), '/api/articles', 'k'.repeat(255), { token: author.token, body: newArticle() })).status).toBe(201);
    expect(await articlesBy(author.username)).toBe(1);
  });

  it('changes nothing without the header, or on methods other than POST', async () => {
    const author = await registerUser(app(), 'idem');
    const body = newArticle();
    const plain = [
      await call(app(), 'POST', '/api/articles', { token: author.token, body }),
      await call(app(), 'POST', '/api/articles', { token: author.token, body }),
    ];
    expect(plain.map((response) => [response.status, response.headers[REPLAYED]])).toEqual([
      [201, undefined],
      [201, undefined],
    ]);
    expect(plain[0]!.body.article.slug).not.toBe(plain[1]!.body.article.slug);

    const key = unique('key-');
    for (const bio of ['first', 'second']) {
      const headers = { 'idempotency-key': key };
      const response = await call(app(), 'PUT', '/api/user', { token: author.token, body: { user: { bio } }, headers });
      expect([response.body.user.bio, response.headers[REPLAYED]]).toEqual([bio, undefined]);
    }
    expect(await keyRow(key)).toBeUndefined();
  });

  it('takes over a claim abandoned for a minute, but not a younger one', async () => {
    const author = await registerUser(app(), 'idem');
    const key = unique('key-');
    const body = newArticle();
    await post(app(), '/api/articles', key, { token: author.token, body });
    // As if the process running the request had died before recording its answer.
    await age(key, ABANDONED_AFTER_MS - 5000, { status: null, response: null });
    expect((await post(app(), '/api/articles', key, { token: author.token, body })).status).toBe(409);

    await age(key, ABANDONED_AFTER_MS + 1000, { status: null, response: null });
    const retried = await post(app(), '/api/articles', key, { token: author.token, body });
    expect([retried.status, retried.headers[REPLAYED]]).toEqual([201, undefined]);
    expect(await keyRow(key)).toMatchObject({ status: 201, response: JSON.stringify(retried.body) });
  });

  it('runs a request again once its key is a day old', async () => {
    const author = await registerUser(app(), 'idem');
    const key = unique('key-');
    const body = newArticle();
    await post(app(), '/api/articles', key, { token: author.token, body });
    await age(key, KEY_LIFETIME_MS - 60_000);
    expect((await post(app(), '/api/articles', key, { token: author.token, body })).headers[REPLAYED]).toBe('true');

    await age(key, KEY_LIFETIME_MS + 1000);
    const later = await post(app(), '/api/articles', key, { token: author.token, body });
    expect([later.status, later.headers[REPLAYED]]).toEqual([201, undefined]);
    expect(await articlesBy(author.username)).toBe(2);
  });

  it('purges keys older than a day in batches, and only those', async () => {
    const now = Date.now();
    const before = now - KEY_LIFETIME_MS;
    // Whatever earlier tests left behind, so that the counts below are this test's rows alone.
    await purgeExpiredKeys(db(), before, 1000);
    const scope = unique('test:');
    const rows = [1, 2, 3, 4, 5, 6].map((i) => ({
      scope,
      key: `k${i}`,
      request_hash: 'h',
      claim: 'c',
      status: 201,
      response: '{}',
      // Five a day old or more, one just under.
      created_at: i === 6 ? before + 1000 : before - i,
    }));
    await db().insertInto('idempotency_keys').values(rows).execute();

    const batches = [];
    for (let i = 0; i < 4; i++) batches.push(await purgeExpiredKeys(db(), before, 2));
    expect(batches).toEqual([2, 2, 1, 0]);
    const left = await db().selectFrom('idempotency_keys').select('key').where('scope', '=', scope).execute();
    expect(left).toEqual([{ key: 'k6' }]);
  });

  it('lets go of the key after a 5xx, so the retry runs the request again', async () => {
    const failFirst = async (run: number) => {
      if (run === 1) throw new Error('a fault of ours');
    };
    await withCountingRoute(failFirst, async (counting, runs) => {
      const key = unique('key-');
      expect((await post(counting, '/api/run', key)).status).toBe(500);
      expect(outcome(await post(counting, '/api/run', key))).toEqual([200, { runs: 2 }, undefined]);
      expect(outcome(await post(counting, '/api/run', key))).toEqual([200, { runs: 2 }, 'true']);
      expect(runs()).toBe(2);
    });
  });

  it('records the answer of a request whose client hung up mid-way, so the retry is a replay', async () => {
    let handlerStarted = () => {};
    const started = new Promise<void>((resolve) => (handlerStarted = resolve));
    // The handler goes on only once the connection is gone for the server too, and the answer has nowhere to go.
    const waitForHangUp = async (_run: number, request: FastifyRequest) => {
      handlerStarted();
      const { socket } = request.raw;
      if (!socket.destroyed) await once(socket, 'close');
    };
    await withCountingRoute(waitForHangUp, async (counting, runs) => {
      const address = new URL(await counting.listen({ port: 0, host: '127.0.0.1' }));
      const key = unique('key-');
      const socket = connect(Number(address.port), address.hostname);
      socket.on('error', () => {});
      socket.end(`POST /api/run HTTP/1.1\r\nHost: ${address.host}\r\nIdempotency-Key: ${key}\r\n\r\n`);
      await started;
      socket.destroy();
      await vi.waitFor(async () => {
        const row = await counting.db.selectFrom('idempotency_keys').select('status').where('key', '=', key).executeTakeFirst();
        expect(row?.status).toBe(200);
      });
      expect(outcome(await post(counting, '/api/run', key))).toEqual([200, { runs: 1 }, 'true']);
      expect(runs()).toBe(1);
    });
  });

  it('holds across instances and restarts: the state is in the database alone', async () => {
    await onScratchDatabase(async (url) => {
      const key = unique('key-');
      const body = newArticle();
      const [one, two] = [await buildApp(testConfig(url)), await buildApp(testConfig(url))];
      const { token } = await registerUser(one);
      const both = await Promise.all([one, two].map((instance) => post(instance, '/api/articles', key, { token, body })));
      await Promise.all([one.close(), two.close()]);
      const executed = both.filter((response) => response.headers[REPLAYED] === undefined && response.status === 201);
      expect(executed).toHaveLength(1);
      const first = executed[0]!;

      const restarted = await buildApp(testConfig(url));
      try {
        const again = await post(restarted, '/api/articles', key, { token, body });
        expect(again.headers[REPLAYED]).toBe('true');
        expect(seen(again)).toEqual(seen(first));
        expect((await call(restarted, 'GET', '/api/articles')).body.articlesCount).toBe(1);
      } finally {
        await restarted.close();
      }
    });
  });
});
