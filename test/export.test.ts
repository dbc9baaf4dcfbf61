import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/index.js';
import { EXPORT_INTERVAL_MS } from '../src/modules/export/queries.js';
import { createScratchDatabase, DATABASES, describeEachDatabase, type ScratchDatabase, testConfig } from './support/app.js';
import { addComment, call, createArticle, registerUser, setFavorite, setFollowing, type TestUser, userIdOf } from './support/client.js';
import { childEnv, NO_RATE_LIMITS, type RunningServer, request, SERVER_ENTRY, startServer } from './support/processes.js';

const EXPORT = '/api/user/export';
const exportOf = (app: FastifyInstance, user: TestUser) => call(app, 'GET', EXPORT, { token: user.token });
const today = () => new Date().toISOString().slice(0, 10);

describeEachDatabase(
  'GET /api/user/export',
  (context) => {
    it('asks for a token', async () => {
      const response = await call(context().app, 'GET', EXPORT);
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is missing'] } });
    });

    it('holds every kind of item the account has, never a secret, as one JSON download', async () => {
      const { app } = context();
      const me = await registerUser(app, 'exporter');
      const other = await registerUser(app, 'other');
      const bio = 'Says "hi" \\ and\nwrites \u2028 across lines, in 日本語 too </script>';
      expect((await call(app, 'PUT', '/api/user', { token: me.token, body: { user: { bio } } })).status).toBe(200);

      const published = await createArticle(app, me.token, { body: 'Published with "quotes" and \\ backslashes', tagList: ['b', 'a'] });
      const draft = await call(app, 'POST', '/api/articles', {
        token: me.token,
        body: { article: { title: 'My draft', description: 'd', body: 'Drafted body\n\ttabbed', status: 'draft' } },
      });
      expect(draft.status).toBe(201);
      const publishAt = new Date(Date.now() + 24 * 60 * 60 * 1000).toISOString();
      const scheduled = await call(app, 'POST', '/api/articles', {
        token: me.token,
        body: { article: { title: 'My scheduled', description: 'd', body: 'Later', publishAt } },
      });
      expect(scheduled.status).toBe(201);

      const theirs = await createArticle(app, other.token, { title: 'Their article' });
      const withdrawn = await createArticle(app, other.token, { title: 'Their withdrawn article' });
      const comment = await addComment(app, me.token, theirs.slug, 'Nice "one"');
      const lostComment = await addComment(app, me.token, withdrawn.slug, 'On what they withdrew');
      await setFavorite(app, me.token, theirs.slug);
      await setFavorite(app, me.token, withdrawn.slug);
      await setFavorite(app, other.token, published.slug);
      await setFollowing(app, me.token, other.username);
      await setFollowing(app, other.token, me.username);
      await addComment(app, other.token, published.slug, 'A comment for you');
      // Unpublished after my comment and favorite: its title is no longer mine to see.
      const unpublished = await call(app, 'PUT', `/api/articles/${withdrawn.slug}`, {
        token: other.token,
        body: { article: { status: 'unpublished' } },
      });
      expect(unpublished.status).toBe(200);

      const webhook = await call(app, 'POST', '/api/webhooks', {
        token: me.token,
        body: { webhook: { url: 'https://hooks.example.com/conduit', events: ['profile.followed'] } },
      });
      expect(webhook.status).toBe(201);
      const { secret } = webhook.body.webhook;
      expect(secret).toEqual(expect.any(String));
      const notifications = (await call(app, 'GET', '/api/notifications?limit=100', { token: me.token })).body.notifications;
      expect(notifications.map((notification: any) => notification.kind).sort()).toEqual(['comment', 'favorite', 'follow']);

      const response = await app.inject({ method: 'GET', url: EXPORT, headers: { authorization: `Token ${me.token}` } });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(response.headers['content-disposition']).toBe(`attachment; filename="conduit-export-${me.username}-${today()}.json"`);
      expect(response.headers['cache-control']).toBe('no-store');
      expect(response.headers.etag).toBeUndefined();
      expect(response.body).not.toContain(secret);
      expect(response.body).not.toContain(me.token);
      expect(response.body).not.toContain('argon2');

      const { export: document } = JSON.parse(response.body);
      expect(Object.keys(document)).toEqual([
        'version',
        'exportedAt',
        'user',
        'articles',
        'comments',
        'favorites',
        'following',
        'followers',
        'notifications',
        'webhooks',
        'reports',
        'moderation',
      ]);
      expect(document.version).toBe(1);
      expect(Date.parse(document.exportedAt)).toBeGreaterThan(Date.now() - 60_000);
      expect(document.user).toEqual({
        email: me.email,
        username: me.username,
        bio,
        image: null,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      });

      const own = (slug: string) => call(app, 'GET', `/api/articles/${slug}`, { token: me.token }).then((answer) => answer.body.article);
      // Each article's revisions as the revisions routes show them, oldest first: one each, from its creation.
      const withRevisions = async (slug: string) => {
        const { revisions } = (await call(app, 'GET', `/api/articles/${slug}/revisions`, { token: me.token })).body;
        const shown = await Promise.all(
          revisions.map((revision: { id: number }) =>
            call(app, 'GET', `/api/articles/${slug}/revisions/${revision.id}`, { token: me.token }).then((answer) => answer.body.revision),
          ),
        );
        return { ...(await own(slug)), revisions: shown.reverse() };
      };
      expect(document.articles).toEqual([
        await withRevisions(published.slug),
        await withRevisions(draft.body.article.slug),
        await withRevisions(scheduled.body.article.slug),
      ]);
      expect(document.articles.map((article: any) => article.revisions.length)).toEqual([1, 1, 1]);
      expect(document.articles.map((article: any) => article.status)).toEqual(['published', 'draft', 'scheduled']);
      expect(document.articles[0]).toMatchObject({
        tagList: ['a', 'b'],
        favoritesCount: 1,
        body: 'Published with "quotes" and \\ backslashes',
      });
      expect(document.articles[2]).toMatchObject({ publishAt, publishedAt: null });

      expect(document.comments).toEqual([
        {
          id: comment.id,
          body: 'Nice "one"',
          createdAt: comment.createdAt,
          updatedAt: comment.updatedAt,
          article: { slug: theirs.slug, title: theirs.title },
        },
        {
          id: lostComment.id,
          body: 'On what they withdrew',
          createdAt: lostComment.createdAt,
          updatedAt: lostComment.updatedAt,
          article: null,
        },
      ]);
      // The favorite on the withdrawn article stays in the database, but names an article that is not mine to see.
      expect(document.favorites).toEqual([{ slug: theirs.slug, title: theirs.title, favoritedAt: expect.any(String) }]);
      expect(document.following).toEqual([{ username: other.username, since: expect.any(String) }]);
      expect(document.followers).toEqual([{ username: other.username, since: expect.any(String) }]);
      expect(document.notifications).toEqual(notifications);
      expect(document.webhooks).toEqual((await call(app, 'GET', '/api/webhooks', { token: me.token })).body.webhooks);
      expect(document.webhooks).toEqual([expect.objectContaining({ url: 'https://hooks.example.com/conduit', enabled: true })]);
      expect(document.reports).toEqual([]);
      expect(document.moderation).toEqual([]);
    });

    it('gives an account with nothing in it a document with every section empty', async () => {
      const { app } = context();
      const loner = await registerUser(app, 'loner');
      const { export: document } = (await exportOf(app, loner)).body;
      for (const section of ['articles', 'comments', 'favorites', 'following', 'followers', 'notifications', 'webhooks']) {
        expect(document[section], section).toEqual([]);
      }
    });

    it('allows one export per account every 10 minutes, with Retry-After, and other accounts are not held back', async () => {
      const { app } = context();
      const [first, second] = [await registerUser(app, 'often'), await registerUser(app, 'apart')];
      expect((await exportOf(app, first)).status).toBe(200);

      const again = await exportOf(app, first);
      expect(again.status).toBe(429);
      expect(again.body).toEqual({ errors: { rate: ['limit exceeded'] } });
      const retryAfter = Number(again.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(EXPORT_INTERVAL_MS / 1000 - 60);
      expect(retryAfter).toBeLessThanOrEqual(EXPORT_INTERVAL_MS / 1000);
      expect(again.headers['cache-control']).toBe('no-store');

      expect((await exportOf(app, second)).status).toBe(200);

      // Nine minutes on it is still refused, with what is left of the wait; at ten it is allowed again.
      const id = await userIdOf(app, first);
      const setLastExport = (at: number) => app.db.updateTable('users').set({ last_export_at: at }).where('id', '=', id).execute();
      await setLastExport(Date.now() - 9 * 60 * 1000);
      const later = await exportOf(app, first);
      expect(later.status).toBe(429);
      expect(Number(later.headers['retry-after'])).toBeGreaterThan(50);
      expect(Number(later.headers['retry-after'])).toBeLessThanOrEqual(60);
      await setLastExport(Date.now() - EXPORT_INTERVAL_MS);
      expect((await exportOf(app, first)).status).toBe(200);
    });

    it('lets only one of many exports at once through', async () => {
      const { app } = context();
      const user = await registerUser(app, 'racer');
      const answers = await Promise.all(Array.from({ length: 5 }, () => exportOf(app, user)));
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 429, 429, 429, 429]);
    });

    it('answers HEAD with 405 instead of spending the export on a body nobody gets', async () => {
      const { app } = context();
      const user = await registerUser(app, 'header');
      const head = await app.inject({ method: 'HEAD', url: EXPORT, headers: { authorization: `Token ${user.token}` } });
      expect(head.statusCode).toBe(405);
      expect(head.headers.allow).toBe('GET, OPTIONS');
      expect((await exportOf(app, user)).status).toBe(200);
    });

    it('names the download in ASCII and, for a username in another script, exactly in filename*', async () => {
      const { app } = context();
      const suffix = String(Date.now());
      const username = `名前${suffix}`;
      const user = { username, email: `${suffix}@example.com`, password: 'password123' };
      const { token } = (await call(app, 'POST', '/api/users', { body: { user } })).body.user;
      const response = await call(app, 'GET', EXPORT, { token });
      const name = `conduit-export-${username}-${today()}.json`;
      expect(response.headers['content-disposition']).toBe(
        `attachment; filename="conduit-export-__${suffix}-${today()}.json"; filename*=UTF-8''${encodeURIComponent(name)}`,
      );
      expect(response.body.export.user.username).toBe(username);
    });
  },
  { WEBHOOKS_DELIVERY: 'off' },
);

/** The resident memory of a process, from Linux's /proc. */
const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

const MiB = 1024 * 1024;
const ARTICLES = 10_000;
/** About 8 KB each, so that the document (80 MB) is larger than the memory the export may take. */
const BODY = `Escaped "quotes", \\ backslashes, a line\nbreak, \u2028 and 日本語: ${'x'.repeat(8000)}`;

/** The server's pools with nothing checked out or waiting, from its /metrics. */
async function poolsIdle(base: string): Promise<boolean> {
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const gauge = (name: string) => Number(new RegExp(`^\\w*${name} (\\d+)$`, 'm').exec(metrics)![1]);
  return gauge('db_pool_idle_clients') === gauge('db_pool_clients') && gauge('db_pool_waiting_requests') === 0;
}

/**
 * GET the export over HTTP, reading it as `consume` decides (it may pause the response), sampling the server's RSS
 * every 20 ms until the body is complete; the body and the highest RSS seen.
 */
async function exportOver(server: RunningServer, token: string, pauseMs = 0) {
  const pid = server.child.pid!;
  let peak = rssOf(pid);
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssOf(pid));
  }, 20);
  try {
    return await new Promise<{ status: number; text: string; peak: () => number; pausedIdle: boolean | null }>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let pausedIdle: boolean | null = null;
      const req = http.get(`${server.base}${EXPORT}`, { headers: { authorization: `Token ${token}` } }, (response) => {
        response.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          if (pauseMs > 0 && chunks.length === 1) {
            response.pause();
            // Once the buffers between the two are full, the server stops reading, and holds no connection.
            setTimeout(async () => {
              const deadline = Date.now() + pauseMs;
              do pausedIdle = await poolsIdle(server.base);
              while (!pausedIdle && Date.now() < deadline);
              response.resume();
            }, pauseMs);
          }
        });
        response.on('end', () =>
          resolve({ status: response.statusCode!, text: Buffer.concat(chunks).toString('utf8'), peak: () => peak, pausedIdle }),
        );
        response.on('error', reject);
      });
      req.on('error', reject);
    });
  } finally {
    clearInterval(sampler);
  }
}

describe.skipIf(!existsSync('/proc/self/status'))('GET /api/user/export of a large account, on a server process', () => {
  for (const kind of DATABASES) {
    describe(kind, () => {
      let scratch: ScratchDatabase | undefined;
      let handle: DatabaseHandle | undefined;
      let server: RunningServer | undefined;
      let user: { token: string; id: number };

      beforeAll(async () => {
        scratch = await createScratchDatabase(kind);
        // With the V8 setting `npm start` and the Dockerfile run the server with (docs/DEPLOY.md).
        const env = childEnv(scratch.url, { ...NO_RATE_LIMITS, NODE_OPTIONS: '--max-semi-space-size=4' });
        server = await startServer(SERVER_ENTRY, [], env);
        const database = testConfig(scratch.url).database;
        // A set-up tool, like the CLI: the bulk load below may run past the statement time-out requests get.
        handle = openDatabase(database.kind === 'postgres' ? { ...database, statementTimeoutMs: 0 } : database);
        const registered = { username: `bulk${Date.now()}`, email: `bulk${Date.now()}@example.com`, password: 'password123' };
        const { token } = (await request(server.base, 'POST', '/api/users', { body: { user: registered } })).body.user;
        const { id } = await handle.db
          .selectFrom('users')
          .select('id')
          .where('username', '=', registered.username)
          .executeTakeFirstOrThrow();
        user = { token, id };
        const now = Date.now() - ARTICLES;
        // In one statement, straight into the table: through the API this would take minutes.
        await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${ARTICLES})
          insert into articles (slug, title, description, body, author_id, status, published_at, listed_at, created_at, updated_at)
          select 'bulk-' || i, 'Bulk ' || i, 'A bulk article', ${BODY}, ${id}, 'published',
            cast(${now} as bigint) + i, cast(${now} as bigint) + i, cast(${now} as bigint) + i, cast(${now} as bigint) + i
          from n`.execute(handle.db);
        // Warm the server up, so that what its first requests compile and cache is not counted against the export.
        for (let i = 0; i < 3; i++) await request(server.base, 'GET', '/api/user/articles?limit=100', { token });
      }, 180_000);

      afterAll(async () => {
        await server?.stop('SIGKILL');
        await handle?.destroy();
        await scratch?.drop();
      });

      const allowAnotherExport = () => handle!.db.updateTable('users').set({ last_export_at: null }).where('id', '=', user.id).execute();

      it('streams all 10,000 articles while the server grows by less than 50 MiB', { timeout: 180_000 }, async () => {
        const before = rssOf(server!.child.pid!);
        const { status, text, peak } = await exportOver(server!, user.token);
        expect(status).toBe(200);
        expect(text.length).toBeGreaterThan(ARTICLES * 8000);
        const { articles } = JSON.parse(text).export;
        expect(articles).toHaveLength(ARTICLES);
        expect(new Set(articles.map((article: any) => article.slug)).size).toBe(ARTICLES);
        expect(articles.every((article: any) => article.body === BODY)).toBe(true);
        expect(peak() - before).toBeLessThan(50 * MiB);
      });

      it('holds no more for a client that stops reading, and no database connection while it waits', { timeout: 180_000 }, async () => {
        await allowAnotherExport();
        const before = rssOf(server!.child.pid!);
        const { status, text, peak, pausedIdle } = await exportOver(server!, user.token, 3000);
        expect(status).toBe(200);
        expect(JSON.parse(text).export.articles).toHaveLength(ARTICLES);
        expect(peak() - before).toBeLessThan(50 * MiB);
        expect(pausedIdle).toBe(true);
      });

      it('stops reading when the client goes away, and keeps answering', { timeout: 60_000 }, async () => {
        await allowAnotherExport();
        await new Promise<void>((resolve, reject) => {
          const req = http.get(`${server!.base}${EXPORT}`, { headers: { authorization: `Token ${user.token}` } }, (response) => {
            response.once('data', () => {
              req.destroy();
              resolve();
            });
          });
          req.on('error', (error) => (req.destroyed ? resolve() : reject(error)));
        });
        await expect.poll(() => poolsIdle(server!.base), { timeout: 10_000 }).toBe(true);
        expect((await request(server!.base, 'GET', '/api/user', { token: user.token })).status).toBe(200);
        // The export was spent on the one that went away.
        expect((await request(server!.base, 'GET', EXPORT, { token: user.token })).status).toBe(429);
      });
    });
  }
});
