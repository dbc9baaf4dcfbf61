import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Agent, cacheStores, interceptors, request } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { strongTag } from '../src/plugins/conditional-get.js';
import { deferPerTest, describeEachDatabase, sqliteAppWith } from './support/app.js';
import {
  addComment,
  call,
  createArticle,
  registerUser,
  setFavorite,
  setFollowing,
  type TestUser,
  unique,
  userIdOf,
} from './support/client.js';

const STRONG_TAG = /^"[\w-]{22}"$/;
// Browsers read Cache-Control and honour stale-while-revalidate, so it is only in the fields that CDNs alone read.
const SHARED = 'public, max-age=0, s-maxage=5';
const FOR_CDNS = 'max-age=5, stale-while-revalidate=30';
const PRIVATE = 'private, no-cache';

/** What a CDN reads in place of Cache-Control: RFC 9213's field and Fastly's. */
const cdnHeaders = (headers: Record<string, unknown>) => [headers['cdn-cache-control'], headers['surrogate-control']];

type Method = 'GET' | 'HEAD' | 'PUT' | 'DELETE';

/** One request, with its raw body: a 304 must have none at all. */
async function send(
  app: FastifyInstance,
  method: Method,
  url: string,
  options: { token?: string; headers?: Record<string, string>; body?: unknown } = {},
) {
  const response = await app.inject({
    method,
    url,
    headers: { ...options.headers, ...(options.token && { authorization: `Token ${options.token}` }) },
    ...(options.body !== undefined && { payload: options.body as object }),
  });
  return { status: response.statusCode, headers: response.headers, text: response.body, raw: response.rawPayload };
}

describeEachDatabase('conditional GET', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;
  const get = (url: string, options: { token?: string; headers?: Record<string, string> } = {}) => send(app(), 'GET', url, options);
  const etagOf = async (url: string, token?: string) => (await get(url, { token })).headers.etag as string;

  let author: TestUser;
  let reader: TestUser;
  let slug: string;
  beforeAll(async () => {
    author = await registerUser(app(), 'author');
    reader = await registerUser(app(), 'reader');
    slug = (await createArticle(app(), author.token, { tagList: [unique('tag')] })).slug;
    await addComment(app(), reader.token, slug);
    await setFollowing(app(), reader.token, author.username);
  });

  describe('ETag', () => {
    it('is a strong tag, the hash of the bytes sent, on every kind of GET', async () => {
      const reads: Array<[string, string | undefined]> = [
        [`/api/articles/${slug}`, undefined],
        [`/api/articles/${slug}`, reader.token],
        ['/api/articles', undefined],
        [`/api/articles?author=${author.username}`, reader.token],
        ['/api/articles/feed', reader.token],
        [`/api/profiles/${author.username}`, undefined],
        [`/api/profiles/${author.username}`, reader.token],
        ['/api/tags', undefined],
        [`/api/articles/${slug}/comments`, undefined],
        ['/api/notifications', author.token],
        ['/api/', undefined],
      ];
      for (const [url, token] of reads) {
        const response = await get(url, { token });
        expect(response.status, url).toBe(200);
        expect(response.headers.etag, url).toMatch(STRONG_TAG);
        expect(response.headers.etag, url).toBe(strongTag(response.raw));
      }
    });

    it('on GET /user covers the account but not the token: two sessions share it, a change moves it', async () => {
      const user = await registerUser(app(), 'devices');
      const login = await call(app(), 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });
      const second = login.body.user.token as string;
      expect(second).not.toBe(user.token);
      const first = await get('/api/user', { token: user.token });
      expect(first.headers.etag).toMatch(STRONG_TAG);
      expect(await etagOf('/api/user', second)).toBe(first.headers.etag);
      expect((await get('/api/user', { token: second, headers: { 'if-none-match': first.headers.etag as string } })).status).toBe(304);
      await call(app(), 'PUT', '/api/user', { token: user.token, body: { user: { bio: 'new bio' } } });
      expect(await etagOf('/api/user', second)).not.toBe(first.headers.etag);
    });

    it('differs between viewers whose answers differ, and is shared by those whose answers do not', async () => {
      const url = `/api/articles/${slug}`;
      expect(await etagOf(url, reader.token)).not.toBe(await etagOf(url));
      const stranger = await registerUser(app(), 'stranger');
      expect(await etagOf(url, stranger.token)).toBe(await etagOf(url));
    });
  });

  describe('If-None-Match', () => {
    it('answers 304 with no body and keeps ETag, Cache-Control and Vary', async () => {
      const url = `/api/articles/${slug}`;
      const full = await get(url, { headers: { origin: 'https://app.example' } });
      const etag = full.headers.etag as string;
      for (const header of [etag, `W/${etag}`, `"other", ${etag}`, `"other",W/${etag} , "more"`, '*']) {
        const response = await get(url, { headers: { 'if-none-match': header, origin: 'https://app.example' } });
        expect(response.status, header).toBe(304);
        expect(response.raw.length, header).toBe(0);
        expect(response.headers.etag).toBe(etag);
        expect(response.headers['cache-control']).toBe(full.headers['cache-control']);
        expect(cdnHeaders(response.headers)).toEqual([FOR_CDNS, FOR_CDNS]);
        expect(response.headers.vary).toBe(full.headers.vary);
        expect(response.headers['content-type']).toBeUndefined();
      }
      const other = await get(url, { headers: { 'if-none-match': '"other", W/"more"' } });
      expect(other.status).toBe(200);
      expect(other.text).toBe(full.text);
    });

    it('answers 200 again once the article is edited, favorited by someone else, or its author renamed', async () => {
      const owner = await registerUser(app(), 'owner');
      const own = (await createArticle(app(), owner.token)).slug;
      const url = `/api/articles/${own}`;
      const changes: Array<() => Promise<unknown>> = [
        () => call(app(), 'PUT', url, { token: owner.token, body: { article: { body: 'edited' } } }),
        () => setFavorite(app(), reader.token, own),
        () => call(app(), 'PUT', '/api/user', { token: owner.token, body: { user: { username: unique('renamed') } } }),
        () => call(app(), 'PUT', '/api/user', { token: owner.token, body: { user: { image: 'https://img.example/me.png' } } }),
      ];
      for (const change of changes) {
        const viewers = [undefined, owner.token];
        const before = await Promise.all(viewers.map((token) => etagOf(url, token)));
        for (const [i, token] of viewers.entries()) {
          expect((await get(url, { token, headers: { 'if-none-match': before[i]! } })).status).toBe(304);
        }
        await change();
        for (const [i, token] of viewers.entries()) {
          const after = await get(url, { token, headers: { 'if-none-match': before[i]! } });
          expect(after.status).toBe(200);
          expect(after.headers.etag).not.toBe(before[i]);
        }
      }
    });

    it('answers 200 on lists once something in them changes', async () => {
      const url = `/api/articles?author=${author.username}`;
      const before = await etagOf(url);
      await setFavorite(app(), reader.token, slug);
      expect((await get(url, { headers: { 'if-none-match': before } })).status).toBe(200);
      const tags = await etagOf('/api/tags');
      await createArticle(app(), author.token, { tagList: [unique('fresh')] });
      expect((await get('/api/tags', { headers: { 'if-none-match': tags } })).status).toBe(200);
      const comments = `/api/articles/${slug}/comments`;
      const commentsTag = await etagOf(comments);
      await addComment(app(), author.token, slug);
      expect((await get(comments, { headers: { 'if-none-match': commentsTag } })).status).toBe(200);
    });

    it('works for HEAD: the same ETag and length as GET, 304 when it matches', async () => {
      const url = `/api/articles/${slug}`;
      const full = await get(url, { token: reader.token });
      const head = await send(app(), 'HEAD', url, { token: reader.token });
      expect(head.status).toBe(200);
      expect(head.raw.length).toBe(0);
      expect(head.headers.etag).toBe(full.headers.etag);
      expect(head.headers['content-length']).toBe(String(full.raw.length));
      const notModified = await send(app(), 'HEAD', url, {
        token: reader.token,
        headers: { 'if-none-match': full.headers.etag as string },
      });
      expect(notModified.status).toBe(304);
      expect(notModified.raw.length).toBe(0);
    });

    it('leaves errors alone and unstored', async () => {
      const missing = await get('/api/articles/no-such-article', { headers: { 'if-none-match': '*' } });
      expect(missing.status).toBe(404);
      expect(missing.headers.etag).toBeUndefined();
      expect(missing.headers['cache-control']).toBe('no-store');
      expect(cdnHeaders(missing.headers)).toEqual([undefined, undefined]);
    });
  });

  describe('Last-Modified and If-Modified-Since', () => {
    /** A user whose profile last changed a minute ago. */
    async function settled() {
      const user = await registerUser(app(), 'settled');
      const minuteAgo = Date.now() - 60_000;
      await db()
        .updateTable('users')
        .set({ updated_at: minuteAgo, profile_updated_at: minuteAgo })
        .where('id', '=', await userIdOf(app(), user))
        .execute();
      return { user, url: `/api/profiles/${user.username}`, lastModified: new Date(Math.floor(minuteAgo / 1000) * 1000).toUTCString() };
    }

    it("is the profile's time on anonymous profile reads, and 304 answers If-Modified-Since from then on", async () => {
      const { url, lastModified } = await settled();
      const full = await get(url);
      expect(full.headers['last-modified']).toBe(lastModified);
      const since = (date: string) => get(url, { headers: { 'if-modified-since': date } });
      expect((await since(lastModified)).status).toBe(304);
      expect((await since(new Date().toUTCString())).status).toBe(304);
      expect((await since(new Date(Date.parse(lastModified) - 1000).toUTCString())).status).toBe(200);
      expect((await since('not a date')).status).toBe(200);
      // If-None-Match decides alone when both are sent.
      expect((await get(url, { headers: { 'if-modified-since': lastModified, 'if-none-match': '"other"' } })).status).toBe(200);
    });

    it('moves with what the profile shows, never with the email or password alone', async () => {
      const { user, url, lastModified } = await settled();
      const shown = await get(url);
      const unchanged = async (what: string) => {
        const now = await get(url);
        expect(now.headers['last-modified'], what).toBe(lastModified);
        expect(now.headers.etag, what).toBe(shown.headers.etag);
      };
      const change = (fields: Record<string, unknown>) => call(app(), 'PUT', '/api/user', { token: user.token, body: { user: fields } });

      await change({ email: `moved-${user.email}` });
      await unchanged('email');
      await change({ password: 'another-password-0123' });
      await unchanged('password');
      // A settings form sends every field with each save: the same name, bio and image are no change.
      await change({ username: user.username, bio: null, image: '', email: `again-${user.email}` });
      await unchanged('the same name, bio and image');

      await change({ bio: 'a bio strangers can read' });
      const moved = await get(url, { headers: { 'if-modified-since': lastModified } });
      expect(moved.status).toBe(200);
      expect(moved.headers.etag).not.toBe(shown.headers.etag);
      const profileTime = async () =>
        (await db().selectFrom('users').select('profile_updated_at').where('username', '=', user.username).executeTakeFirstOrThrow())
          .profile_updated_at;
      expect(Number(await profileTime())).toBeGreaterThan(Date.parse(lastModified) + 1000);
    });

    it('is absent within the second of a change, so that a later change in that second is not missed', async () => {
      const { user, url, lastModified } = await settled();
      await call(app(), 'PUT', '/api/user', { token: user.token, body: { user: { bio: 'changed' } } });
      const after = await get(url, { headers: { 'if-modified-since': lastModified } });
      expect(after.status).toBe(200);
      expect(after.headers['last-modified']).toBeUndefined();
    });

    it('is absent where no time bounds the answer: a signed-in profile read, articles, lists, comments, tags', async () => {
      const { url } = await settled();
      for (const [path, token] of [
        [url, reader.token],
        [`/api/articles/${slug}`, undefined],
        ['/api/articles', undefined],
        [`/api/articles/${slug}/comments`, undefined],
        ['/api/tags', undefined],
      ] as const) {
        expect((await get(path, { token })).headers['last-modified'], path).toBeUndefined();
      }
      expect((await get(url, { token: reader.token, headers: { 'if-modified-since': new Date().toUTCString() } })).status).toBe(200);
    });
  });

  describe('Cache-Control and Vary', () => {
    it('lets shared caches keep anonymous reads, keeps signed-in ones private, and varies on Authorization', async () => {
      const cases: Array<[string, string | undefined, string]> = [
        [`/api/articles/${slug}`, undefined, SHARED],
        [`/api/articles/${slug}`, reader.token, PRIVATE],
        ['/api/articles', undefined, SHARED],
        ['/api/articles', reader.token, PRIVATE],
        ['/api/articles/feed', reader.token, PRIVATE],
        [`/api/profiles/${author.username}`, undefined, SHARED],
        [`/api/profiles/${author.username}`, reader.token, PRIVATE],
        ['/api/user', reader.token, PRIVATE],
        ['/api/notifications', reader.token, PRIVATE],
        ['/api/webhooks', reader.token, PRIVATE],
      ];
      for (const [url, token, cacheControl] of cases) {
        const response = await get(url, { token, headers: { origin: 'https://app.example' } });
        const viewer = `${url} ${token ? 'signed in' : 'anonymous'}`;
        expect(response.headers['cache-control'], viewer).toBe(cacheControl);
        // A CDN reads these instead of Cache-Control, so they must never come with a private answer.
        const forCdns = cacheControl === SHARED ? FOR_CDNS : undefined;
        expect(cdnHeaders(response.headers), viewer).toEqual([forCdns, forCdns]);
        expect(response.headers.vary, url).toBe('Origin, Authorization');
      }
    });

    it('does not vary the tag list on Authorization: a token there is ignored', async () => {
      const response = await get('/api/tags', { token: reader.token });
      expect(response.headers['cache-control']).toBe(SHARED);
      expect(cdnHeaders(response.headers)).toEqual([FOR_CDNS, FOR_CDNS]);
      expect(String(response.headers.vary ?? '')).not.toMatch(/authorization/i);
    });

    it('lets a frontend on another origin read the ETag and send the conditional headers', async () => {
      const origin = 'https://app.example';
      const preflight = await app().inject({
        method: 'OPTIONS',
        url: `/api/articles/${slug}`,
        headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization,if-match' },
      });
      const allowed = String(preflight.headers['access-control-allow-headers'])
        .toLowerCase()
        .split(/\s*,\s*/);
      expect(allowed).toEqual(expect.arrayContaining(['if-match', 'if-none-match', 'if-modified-since']));
      const read = await get(`/api/articles/${slug}`, { headers: { origin } });
      expect(
        String(read.headers['access-control-expose-headers'])
          .toLowerCase()
          .split(/\s*,\s*/),
      ).toContain('etag');
    });

    it('never stores the probes or the metrics, and gives them no ETag', async () => {
      for (const url of ['/health/live', '/health/ready', '/metrics']) {
        const response = await get(url, { headers: { 'if-none-match': '*' } });
        expect(response.status, url).toBe(200);
        expect(response.headers['cache-control'], url).toBe('no-store');
        expect(cdnHeaders(response.headers), url).toEqual([undefined, undefined]);
        expect(response.headers.etag, url).toBeUndefined();
      }
    });
  });

  describe('If-Match', () => {
    const articleRow = (articleSlug: string) => db().selectFrom('articles').selectAll().where('slug', '=', articleSlug).executeTakeFirst();
    const put = (articleSlug: string, token: string, ifMatch: string, article: object) =>
      send(app(), 'PUT', `/api/articles/${articleSlug}`, { token, headers: { 'if-match': ifMatch }, body: { article } });

    it('on PUT /articles/:slug: a stale copy gets 412 and writes nothing; the current one writes and gets the new ETag', async () => {
      const owner = await registerUser(app(), 'editor');
      const own = (await createArticle(app(), owner.token)).slug;
      const url = `/api/articles/${own}`;
      const read = await etagOf(url, owner.token);
      await setFavorite(app(), reader.token, own);
      const rowBefore = await articleRow(own);
      const events = await db()
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();

      const stale = await put(own, owner.token, read, { body: 'overwritten', title: unique('Overwritten ') });
      expect(stale.status).toBe(412);
      expect(JSON.parse(stale.text)).toEqual({ errors: { 'If-Match': ['does not match the current version'] } });
      expect(await articleRow(own)).toEqual(rowBefore);
      expect(
        await db()
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow(),
      ).toEqual(events);
      expect((await put(own, owner.token, `W/${await etagOf(url, owner.token)}`, { body: 'weak' })).status).toBe(412);

      const current = await etagOf(url, owner.token);
      const written = await put(own, owner.token, `"other", ${current}`, { body: 'edited' });
      expect(written.status).toBe(200);
      expect((await articleRow(own))?.body).toBe('edited');
      expect(written.headers.etag).toBe(await etagOf(url, owner.token));
      expect((await put(own, owner.token, written.headers.etag as string, { body: 'chained' })).status).toBe(200);
      expect((await put(own, owner.token, '*', { body: 'any' })).status).toBe(200);
      expect((await articleRow(own))?.body).toBe('any');
    });

    it('on DELETE /articles/:slug: a stale copy gets 412 and the article stays; the current one deletes', async () => {
      const owner = await registerUser(app(), 'deleter');
      const own = (await createArticle(app(), owner.token)).slug;
      const read = await etagOf(`/api/articles/${own}`, owner.token);
      await setFavorite(app(), reader.token, own);
      const remove = (ifMatch: string) =>
        send(app(), 'DELETE', `/api/articles/${own}`, { token: owner.token, headers: { 'if-match': ifMatch } });
      expect((await remove(read)).status).toBe(412);
      expect(await articleRow(own)).toBeDefined();
      expect((await remove(await etagOf(`/api/articles/${own}`, owner.token))).status).toBe(204);
      expect(await articleRow(own)).toBeUndefined();
    });

    it('comes after 404 and 403', async () => {
      expect((await put('no-such-article', author.token, '"stale"', { body: 'x' })).status).toBe(404);
      expect((await put(slug, reader.token, '"stale"', { body: 'x' })).status).toBe(403);
    });

    it('on PUT /user: the other device, with the copy from before the first one wrote, gets 412 and writes nothing', async () => {
      const user = await registerUser(app(), 'twodevices');
      const login = await call(app(), 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });
      const [phone, laptop] = [user.token, login.body.user.token as string];
      const [phoneCopy, laptopCopy] = [await etagOf('/api/user', phone), await etagOf('/api/user', laptop)];
      const update = (token: string, ifMatch: string, changes: object) =>
        send(app(), 'PUT', '/api/user', { token, headers: { 'if-match': ifMatch }, body: { user: changes } });

      const first = await update(phone, phoneCopy, { bio: 'from the phone' });
      expect(first.status).toBe(200);
      expect(first.headers.etag).toBe(await etagOf('/api/user', laptop));
      const row = () => db().selectFrom('users').selectAll().where('email', '=', user.email).executeTakeFirst();
      const before = await row();
      const second = await update(laptop, laptopCopy, { bio: 'from the laptop', image: 'https://img.example/l.png' });
      expect(second.status).toBe(412);
      expect(await row()).toEqual(before);
      expect((await update(laptop, first.headers.etag as string, { bio: 'from the laptop' })).status).toBe(200);
    });

    it('lets exactly one of two concurrent writes based on the same copy through', async () => {
      for (let round = 0; round < 5; round++) {
        const owner = await registerUser(app(), 'racer');
        const login = await call(app(), 'POST', '/api/users/login', { body: { user: { email: owner.email, password: owner.password } } });
        const devices = [owner.token, login.body.user.token as string];
        const own = (await createArticle(app(), owner.token)).slug;
        const copy = await etagOf(`/api/articles/${own}`, owner.token);
        const articles = await Promise.all(devices.map((token, i) => put(own, token, copy, { body: `device ${i}` })));
        expect(articles.map((response) => response.status).sort()).toEqual([200, 412]);
        const winner = articles.findIndex((response) => response.status === 200);
        expect((await articleRow(own))?.body).toBe(`device ${winner}`);

        const account = await etagOf('/api/user', owner.token);
        const users = await Promise.all(
          devices.map((token, i) =>
            send(app(), 'PUT', '/api/user', { token, headers: { 'if-match': account }, body: { user: { bio: `device ${i}` } } }),
          ),
        );
        expect(users.map((response) => response.status).sort()).toEqual([200, 412]);
        const userWinner = users.findIndex((response) => response.status === 200);
        expect((await call(app(), 'GET', '/api/user', { token: owner.token })).body.user.bio).toBe(`device ${userWinner}`);
      }
    });

    it('leaves Idempotency-Key replays as they were: the same answer, no validators on a POST', async () => {
      const headers = { 'idempotency-key': unique('key') };
      const favorite = () =>
        app().inject({
          method: 'POST',
          url: `/api/articles/${slug}/favorite`,
          headers: { ...headers, authorization: `Token ${author.token}` },
        });
      const original = await favorite();
      const replay = await favorite();
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toBe(original.body);
      expect(replay.headers.etag).toBeUndefined();
    });
  });
});

describe('a shared cache in front (undici, RFC 9111)', () => {
  const defer = deferPerTest();

  it("serves anonymous answers from the cache, and never one viewer's favorited or following flags to another", async () => {
    const app = await sqliteAppWith(defer, {});
    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const agent = new Agent().compose(interceptors.cache({ store: new cacheStores.MemoryCacheStore(), type: 'shared' }));
    defer(() => agent.close());

    const writer = await registerUser(app, 'writer');
    const fan = await registerUser(app, 'fan');
    const other = await registerUser(app, 'other');
    const { slug } = await createArticle(app, writer.token);
    await setFavorite(app, fan.token, slug);
    await setFollowing(app, fan.token, writer.username);

    /** Through the cache; the request id says which answer the server made, so a repeated id is a cache hit. */
    const viaCache = async (path: string, user?: TestUser) => {
      const response = await request(`${origin}${path}`, {
        dispatcher: agent,
        headers: user ? { authorization: `Token ${user.token}` } : {},
      });
      return { id: response.headers['x-request-id'], body: (await response.body.json()) as any };
    };
    const flags = (body: any) => [body.article.favorited, body.article.author.following];

    const path = `/api/articles/${slug}`;
    const anonymous = await viaCache(path);
    expect(flags(anonymous.body)).toEqual([false, false]);
    expect((await viaCache(path)).id, 'the anonymous answer is kept').toBe(anonymous.id);

    const asFan = await viaCache(path, fan);
    expect(asFan.id).not.toBe(anonymous.id);
    expect(flags(asFan.body)).toEqual([true, true]);
    const asOther = await viaCache(path, other);
    expect(flags(asOther.body)).toEqual([false, false]);
    expect(asOther.id).not.toBe(asFan.id);
    const fanAgain = await viaCache(path, fan);
    expect(fanAgain.id, 'a signed-in answer is never kept').not.toBe(asFan.id);
    expect(flags(fanAgain.body)).toEqual([true, true]);
    // undici drops what it holds for a URL when a private answer for it passes by; a CDN may keep it. Either way
    // the anonymous copy is the anonymous answer, and is kept again.
    const anonymousAgain = await viaCache(path);
    expect(flags(anonymousAgain.body)).toEqual([false, false]);
    expect((await viaCache(path)).id).toBe(anonymousAgain.id);

    const list = `/api/articles?author=${writer.username}`;
    const anonymousList = await viaCache(list);
    expect((await viaCache(list)).id).toBe(anonymousList.id);
    expect((await viaCache(list, fan)).body.articles[0].favorited).toBe(true);
    expect((await viaCache(list, other)).body.articles[0].favorited).toBe(false);
    expect((await viaCache(list)).body.articles[0].favorited).toBe(false);
    const profile = `/api/profiles/${writer.username}`;
    expect((await viaCache(profile, fan)).body.profile.following).toBe(true);
    expect((await viaCache(profile)).body.profile.following).toBe(false);
    expect((await viaCache(profile, other)).body.profile.following).toBe(false);
  });

  it('leaves the event stream alone: no ETag, its own Cache-Control', async () => {
    const app = await sqliteAppWith(defer, {});
    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const aborted = new AbortController();
    const response = await fetch(`${origin}/api/events`, { signal: aborted.signal });
    expect(response.status).toBe(200);
    expect(response.headers.get('etag')).toBeNull();
    expect(response.headers.get('cache-control')).toBe('no-cache');
    aborted.abort();
  });

  it('takes its freshness from the settings', async () => {
    const app = await sqliteAppWith(defer, { SHARED_CACHE_MAX_AGE: '60', SHARED_CACHE_STALE_WHILE_REVALIDATE: '0' });
    const response = await app.inject({ method: 'GET', url: '/api/tags' });
    expect(response.headers['cache-control']).toBe('public, max-age=0, s-maxage=60');
    expect(cdnHeaders(response.headers)).toEqual(['max-age=60, stale-while-revalidate=0', 'max-age=60, stale-while-revalidate=0']);
  });
});
