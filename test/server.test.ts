import { once } from 'node:events';
import { type AddressInfo, connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, DATABASES, type ScratchDatabase, testConfig } from './support/app.js';
import { unique } from './support/client.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The app listening on a real socket (port 0, loopback), driven with the global fetch: what a client sees
 * through Node's HTTP server, not through inject().
 */
for (const kind of DATABASES) {
  describe(`real server [${kind}]`, () => {
    let scratch: ScratchDatabase | undefined;
    let app: FastifyInstance | undefined;
    let base = '';

    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
      app = await buildApp(testConfig(scratch.url));
      await app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.server.address() as AddressInfo;
      expect(address.port).toBeGreaterThan(0);
      base = `http://127.0.0.1:${address.port}`;
    });

    afterAll(async () => {
      await app?.close();
      await scratch?.drop();
    });

    const send = async (
      method: string,
      path: string,
      options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
    ) => {
      const headers: Record<string, string> = { ...options.headers };
      if (options.token) headers.authorization = `Token ${options.token}`;
      let body: string | undefined;
      if (options.body !== undefined) {
        headers['content-type'] ??= 'application/json';
        body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
      }
      const response = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined && { body }) });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text, json: text === '' ? undefined : JSON.parse(text) };
    };

    it('registers, creates an article and lists it over HTTP', async () => {
      const username = unique('srv');
      const registered = await send('POST', '/api/users', {
        body: { user: { username, email: `${username}@example.com`, password: 'password123' } },
      });
      expect(registered.status).toBe(201);
      expect(registered.headers.get('content-type')).toBe(JSON_TYPE);
      expect(registered.json).toEqual({
        user: { username, email: `${username}@example.com`, bio: null, image: null, role: 'user', token: expect.any(String) },
      });
      const token: string = registered.json.user.token;

      const tag = unique('srvtag');
      const created = await send('POST', '/api/articles', {
        token,
        body: { article: { title: `Over the wire ${username}`, description: 'Real sockets', body: 'Hello', tagList: [tag] } },
      });
      expect(created.status).toBe(201);
      expect(created.json.article).toMatchObject({
        title: `Over the wire ${username}`,
        description: 'Real sockets',
        body: 'Hello',
        tagList: [tag],
        favorited: false,
        favoritesCount: 0,
        author: { username, bio: null, image: null, following: false },
      });
      const slug: string = created.json.article.slug;

      const listed = await send('GET', `/api/articles?author=${encodeURIComponent(username)}`);
      expect(listed.status).toBe(200);
      expect(listed.json.articlesCount).toBe(1);
      expect(listed.json.articles).toHaveLength(1);
      expect(listed.json.articles[0]).toMatchObject({ slug, title: `Over the wire ${username}`, tagList: [tag] });
      expect(listed.json.articles[0]).not.toHaveProperty('body');

      const single = await send('GET', `/api/articles/${slug}`, { token });
      expect(single.status).toBe(200);
      expect(single.json.article.body).toBe('Hello');

      const tags = await send('GET', '/api/tags');
      expect(tags.json.tags).toContain(tag);

      const me = await send('GET', '/api/user', { headers: { authorization: `Bearer ${token}` } });
      expect(me.status).toBe(200);
      expect(me.json.user.token).toBe(token);
    });

    it('answers errors over HTTP with the contract bodies', async () => {
      const missing = await send('GET', '/api/user');
      expect(missing.status).toBe(401);
      expect(missing.json).toEqual({ errors: { token: ['is missing'] } });

      const route = await send('GET', '/api/does-not-exist');
      expect(route.status).toBe(404);
      expect(route.json).toEqual({ errors: { route: ['not found'] } });
      expect(route.headers.get('content-type')).toBe(JSON_TYPE);

      const notJson = await send('POST', '/api/users', { body: '{"user": {' });
      expect(notJson.status).toBe(400);
      expect(notJson.json).toEqual({ errors: { body: ['is not valid JSON'] } });

      const malformed = await send('GET', '/api/profiles/%E0%A4%A');
      expect(malformed.status).toBeLessThan(500);
      expect(malformed.headers.get('content-type')).toBe(JSON_TYPE);
    });

    it('refuses a body over 1 MiB with 413 over HTTP', async () => {
      const payload = JSON.stringify({
        user: { username: unique(), email: `${unique()}@example.com`, password: 'password123', pad: 'x'.repeat(1024 * 1024) },
      });
      const response = await send('POST', '/api/users', { body: payload });
      expect(response.status).toBe(413);
      expect(response.json).toEqual({ errors: { body: ['is too large'] } });

      // Also when the body is streamed without a Content-Length.
      const bytes = new TextEncoder().encode(payload);
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += 64 * 1024) controller.enqueue(bytes.subarray(offset, offset + 64 * 1024));
          controller.close();
        },
      });
      const chunked = await fetch(`${base}/api/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: stream,
        duplex: 'half',
      } as RequestInit & { duplex: 'half' });
      expect(chunked.status).toBe(413);
      expect(await chunked.json()).toEqual({ errors: { body: ['is too large'] } });
    });

    it('accepts follow with Content-Type: application/json and an empty body over HTTP', async () => {
      const fan = await send('POST', '/api/users', {
        body: { user: { username: unique('fan'), email: `${unique()}@example.com`, password: 'password123' } },
      });
      const starName = unique('star');
      await send('POST', '/api/users', {
        body: { user: { username: starName, email: `${starName}@example.com`, password: 'password123' } },
      });
      const token: string = fan.json.user.token;
      for (const [method, following] of [
        ['POST', true],
        ['DELETE', false],
      ] as const) {
        const response = await send(method, `/api/profiles/${starName}/follow`, { token, body: '' });
        expect(response.status, method).toBe(200);
        // A signed-in caller's profile answer says whether they block or mute it (CONTRACT.md, Moderation).
        expect(response.json.profile).toEqual({ username: starName, bio: null, image: null, following, blocking: false, muting: false });
      }
    });

    it('answers a CORS preflight over HTTP', async () => {
      const response = await fetch(`${base}/api/articles`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://frontend.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization,content-type',
        },
      });
      expect(response.status).toBeGreaterThanOrEqual(200);
      expect(response.status).toBeLessThan(300);
      expect(['https://frontend.example', '*']).toContain(response.headers.get('access-control-allow-origin'));
      const allowed = String(response.headers.get('access-control-allow-headers')).toLowerCase();
      expect(allowed).toContain('authorization');
      expect(allowed).toContain('content-type');
    });

    it('serves concurrent requests on one socket server', async () => {
      const responses = await Promise.all(Array.from({ length: 20 }, () => send('GET', '/api/articles?limit=5')));
      for (const response of responses) {
        expect(response.status).toBe(200);
        expect(response.json).toEqual({ articles: expect.any(Array), articlesCount: expect.any(Number), nextCursor: null });
      }
    });
  });
}

describe('a client that goes away mid-request', () => {
  let scratch: ScratchDatabase | undefined;
  let app: FastifyInstance | undefined;
  const lines: string[] = [];

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    // The per-address limit on, as in production (the overload protection is on by default): both read the address.
    const config = testConfig(scratch.url, { LOG_LEVEL: 'debug', RATE_LIMIT_MAX: '600' });
    app = await buildApp(config, { logStream: { write: (line) => void lines.push(line) } });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });

  afterAll(async () => {
    await app?.close();
    await scratch?.drop();
  });

  it('is logged at info as a client that closed the connection, not as a database outage', async () => {
    const id = unique('gone-');
    const ofRequest = () => lines.map((line) => JSON.parse(line)).filter((entry) => entry.reqId === id);
    const socket = connect((app!.server.address() as AddressInfo).port, '127.0.0.1');
    await once(socket, 'connect');
    // A body shorter than its Content-Length: the server is still waiting for the rest when the socket closes.
    socket.write(
      `POST /api/users HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: ${id}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"user":{"username":',
    );
    await vi.waitFor(() => expect(ofRequest().map((entry) => entry.msg)).toContain('incoming request'));
    socket.destroy();

    await vi.waitFor(() => expect(ofRequest().filter((entry) => entry.level >= 30)).not.toEqual([]));
    // Anything logged late would show up here too.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(ofRequest().filter((entry) => entry.level >= 30)).toEqual([
      expect.objectContaining({ level: 30, msg: 'the client closed the connection before sending its whole request' }),
    ]);
    expect(JSON.stringify(ofRequest())).not.toMatch(/database/i);
  });

  it('handles the requests of clients that reset their connection right after sending them, logging no error', async () => {
    const id = unique('reset-');
    const ofResets = () => lines.map((line) => JSON.parse(line)).filter((entry) => String(entry.reqId).startsWith(id));
    const resets = 20;
    for (let i = 0; i < resets; i++) {
      const socket = connect((app!.server.address() as AddressInfo).port, '127.0.0.1');
      await once(socket, 'connect');
      // The request and a TCP reset at once: by the time the server reads the request, Node no longer knows the peer.
      socket.write(`GET /api/tags HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: ${id}-${i}\r\n\r\n`);
      socket.resetAndDestroy();
      await once(socket, 'close');
    }
    const arrived = () => ofResets().filter((entry) => entry.msg === 'incoming request');
    await vi.waitFor(() => expect(arrived()).toHaveLength(resets));
    // The case at hand: requests read once their client was gone, with no address to log.
    expect(arrived().filter((entry) => entry.req.remoteAddress === undefined)).not.toEqual([]);
    // Anything logged late would show up here too.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(ofResets().filter((entry) => entry.level >= 50)).toEqual([]);
  });
});
