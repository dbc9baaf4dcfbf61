import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createScratchDatabase, type ScratchDatabase } from './support/app.js';
import { unique } from './support/client.js';
import { CONDUIT_BIN, childEnv, type RunningServer, request, SERVER_ENTRY, startServer } from './support/processes.js';

const POSTGRES = Boolean(process.env.TEST_DATABASE_URL);
if (!POSTGRES) console.log('[conduit] two-instance test SKIPPED: it needs PostgreSQL; set TEST_DATABASE_URL to run it.');

/** Stateless instances: whatever one process writes, the other serves at once, tokens included. */
describe.skipIf(!POSTGRES)('two server processes on one PostgreSQL database', () => {
  let scratch: ScratchDatabase | undefined;
  const servers: RunningServer[] = [];

  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
    const env = childEnv(scratch.url);
    // Started together, so both migrate at once: Kysely's migration lock must let exactly one do it.
    servers.push(...(await Promise.all([startServer(CONDUIT_BIN, ['serve'], env), startServer(SERVER_ENTRY, [], env)])));
  });

  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await scratch?.drop();
  });

  it('shares users, sessions, articles and favorite counts between instances', async () => {
    const [a, b] = servers.map((server) => server.base) as [string, string];
    const username = unique('multi');
    const user = { username, email: `${username}@example.com`, password: 'password123' };

    const registered = await request(a, 'POST', '/api/users', { body: { user } });
    expect(registered.status).toBe(201);
    const loggedIn = await request(b, 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });
    expect(loggedIn.status).toBe(200);
    const token: string = loggedIn.body.user.token;
    // A token from one instance is good on the other: they share only JWT_SECRET, no session store.
    expect((await request(a, 'GET', '/api/user', { token: registered.body.user.token })).status).toBe(200);

    const created = await request(b, 'POST', '/api/articles', {
      token,
      body: { article: { title: `Across instances ${username}`, description: 'Two processes', body: 'One database', tagList: ['scale'] } },
    });
    expect(created.status).toBe(201);
    const slug: string = created.body.article.slug;

    const read = await request(a, 'GET', `/api/articles/${slug}`);
    expect(read.status).toBe(200);
    expect(read.body.article).toMatchObject({ slug, body: 'One database', tagList: ['scale'], author: { username } });

    const favorited = await request(a, 'POST', `/api/articles/${slug}/favorite`, { token });
    expect(favorited.status).toBe(200);
    expect(favorited.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
    const seenByB = await request(b, 'GET', `/api/articles/${slug}`, { token });
    expect(seenByB.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
  });

  it("serves the other instance's tag changes at once, though each caches its tag list", async () => {
    const [a, b] = servers.map((server) => server.base) as [string, string];
    const username = unique('tagger');
    const user = { username, email: `${username}@example.com`, password: 'password123' };
    const token: string = (await request(a, 'POST', '/api/users', { body: { user } })).body.user.token;
    const tag = unique('cached');
    expect((await request(a, 'GET', '/api/tags')).body.tags).not.toContain(tag);

    const created = await request(b, 'POST', '/api/articles', {
      token,
      body: { article: { title: `Tag cache ${tag}`, description: 'd', body: 'b', tagList: [tag] } },
    });
    expect(created.status).toBe(201);
    expect((await request(a, 'GET', '/api/tags')).body.tags).toContain(tag);

    const slug: string = created.body.article.slug;
    expect((await request(b, 'PUT', `/api/articles/${slug}`, { token, body: { article: { tagList: [] } } })).status).toBe(200);
    expect((await request(a, 'GET', '/api/tags')).body.tags).not.toContain(tag);
  });

  it('stops each instance gracefully on SIGTERM', async () => {
    for (const server of servers.splice(0)) expect(await server.stop('SIGTERM')).toBe(0);
  });
});

describe('WORKERS=2: one port, two worker processes', () => {
  let scratch: ScratchDatabase | undefined;
  let server: RunningServer | undefined;

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { WORKERS: '2', LOG_LEVEL: 'info' }));
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await scratch?.drop();
  });

  it('runs two listening workers that answer, replaces a crashed one, and exits 0 on SIGTERM once all have stopped', async () => {
    const running = server!;
    const username = unique('workers');
    const user = { username, email: `${username}@example.com`, password: 'password123' };
    expect((await request(running.base, 'POST', '/api/users', { body: { user } })).status).toBe(201);
    for (let i = 0; i < 6; i++) {
      const login = await request(running.base, 'POST', '/api/users/login', {
        body: { user: { email: user.email, password: user.password } },
      });
      expect(login.status).toBe(200);
    }

    // Each worker logs its own listening line with its pid: two distinct processes share the port. The first
    // to listen already answers, so the second may still be starting.
    const listeningPids = () =>
      running
        .output()
        .split('\n')
        .filter((line) => line.includes('Conduit listening on'))
        .map((line) => JSON.parse(line).pid);
    await vi.waitFor(() => expect(new Set(listeningPids()).size).toBe(2), { timeout: 20_000, interval: 100 });
    expect(running.output()).toMatch(/conduit\[primary \d+\]: started 2 workers/);

    // A crashed worker is replaced, and the port keeps answering meanwhile through the other one.
    const [victim] = listeningPids();
    process.kill(victim, 'SIGKILL');
    await vi.waitFor(() => expect(new Set(listeningPids()).size).toBe(3), { timeout: 20_000, interval: 100 });
    expect(running.output()).toContain(`worker ${victim} died (SIGKILL); starting another in 250 ms`);
    expect((await request(running.base, 'GET', '/api/tags')).status).toBe(200);

    expect(await running.stop('SIGTERM')).toBe(0);
    expect(running.output()).toMatch(/SIGTERM: stopping 2 worker\(s\)/);
    expect(running.output().match(/shutting down: finishing in-flight requests/g)).toHaveLength(2);
  });
});
