import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { isInstalled, loggerOptions } from '../src/plugins/logging.js';
import { createScratchDatabase, type ScratchDatabase, testConfig } from './support/app.js';
import { call, unique } from './support/client.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('request ids and logs', () => {
  let scratch: ScratchDatabase | undefined;
  let app: FastifyInstance;
  /** Every line the app logged, as written. */
  const lines: string[] = [];
  const logged = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    app = await buildApp(testConfig(scratch.url, { LOG_LEVEL: 'trace' }), { logStream: { write: (line) => void lines.push(line) } });
  });

  afterEach(() => {
    lines.length = 0;
  });

  afterAll(async () => {
    await app?.close();
    await scratch?.drop();
  });

  it('keeps a well-formed X-Request-Id and sends it back', async () => {
    for (const id of ['abc', 'trace-1.2_3', 'A'.repeat(128)]) {
      const response = await call(app, 'GET', '/api/tags', { headers: { 'x-request-id': id } });
      expect(response.headers['x-request-id'], id).toBe(id);
    }
  });

  it('replaces a missing or malformed X-Request-Id with a fresh UUID', async () => {
    const malformed = ['', 'A'.repeat(129), 'has space', 'quote"d', 'semi;colon', 'ünïcode', 'line\tbreak'];
    const seen = new Set<string>();
    for (const id of [undefined, ...malformed]) {
      const response = await call(app, 'GET', '/api/tags', { headers: id === undefined ? {} : { 'x-request-id': id } });
      const sent = String(response.headers['x-request-id']);
      expect(sent, String(id)).toMatch(UUID);
      seen.add(sent);
    }
    expect(seen.size).toBe(malformed.length + 1);
  });

  it('sends the id on every kind of answer: errors, 404s, probes, scrapes and preflights', async () => {
    const cases: Array<[string, string, number, Record<string, string>?, string?]> = [
      ['GET', '/api/user', 401],
      ['GET', '/api/articles/not-there', 404],
      ['GET', '/no/such/route', 404],
      ['GET', '/api/articles/%E0%A4%A', 400],
      ['GET', '/api/articles?limit=0', 422],
      ['POST', '/api/users', 400, { 'content-type': 'application/json' }, '{"user":'],
      ['GET', '/health/live', 200],
      ['GET', '/health/ready', 200],
      ['GET', '/metrics', 200],
      ['OPTIONS', '/api/articles', 204, { origin: 'https://app.example', 'access-control-request-method': 'POST' }],
    ];
    for (const [method, url, status, headers = {}, payload] of cases) {
      const id = unique('id-');
      const response = await app.inject({
        method: method as 'GET',
        url,
        headers: { ...headers, 'x-request-id': id },
        ...(payload !== undefined && { payload }),
      });
      expect(response.statusCode, `${method} ${url}`).toBe(status);
      expect(response.headers['x-request-id'], `${method} ${url}`).toBe(id);
    }
  });

  it('writes JSON log lines carrying the request id', async () => {
    const id = unique('logged-');
    await call(app, 'GET', '/api/articles/not-there', { headers: { 'x-request-id': id } });
    const entries = logged().filter((entry) => entry.reqId === id);
    // At info, one line per request with the request and the answer; the arrival is logged at debug only.
    expect(entries.map((entry) => [entry.msg, entry.level])).toEqual([
      ['incoming request', 20],
      ['request completed', 30],
    ]);
    expect(entries[1]).toMatchObject({ req: { method: 'GET', url: '/api/articles/not-there' }, res: { statusCode: 404 } });
    expect(entries[1]?.responseTime).toEqual(expect.any(Number));
  });

  it('logs a URL the router refuses like any other request: one line at info, with the URL as the client sent it', async () => {
    const id = unique('refused-');
    const response = await app.inject({ url: '/api/articles/%E0%A4%A', headers: { 'x-request-id': id } });
    expect(response.statusCode).toBe(400);
    const entries = logged().filter((entry) => entry.reqId === id && Number(entry.level) >= 30);
    expect(entries).toEqual([
      expect.objectContaining({
        msg: 'request completed',
        req: expect.objectContaining({ url: '/api/articles/%E0%A4%A' }),
        res: { statusCode: 400 },
      }),
    ]);
  });

  it('does not log successful probes or scrapes, even at trace level', async () => {
    await call(app, 'GET', '/health/live');
    await call(app, 'GET', '/health/ready');
    await app.inject({ url: '/metrics' });
    expect(lines).toEqual([]);
  });

  it('never logs a password, a token or a known-device value', async () => {
    const username = unique('secretive');
    const password = `pw-${unique()}-not-for-logs`;
    const registered = await call(app, 'POST', '/api/users', {
      body: { user: { username, email: `${username}@example.com`, password } },
    });
    expect(registered.status).toBe(201);
    const token: string = registered.body.user.token;
    const login = { body: { user: { email: `${username}@example.com`, password } } };
    const device = String((await call(app, 'POST', '/api/users/login', login)).headers['known-device']);
    await call(app, 'POST', '/api/users/login', { ...login, headers: { 'known-device': device, cookie: `conduit_device=${device}` } });
    await call(app, 'GET', '/api/user', { token });
    await call(app, 'PUT', '/api/user', { token, body: { user: { password: `${password}-new` } } });
    await call(app, 'GET', '/api/user', { token: `${token}tampered` });

    expect(lines.length).toBeGreaterThan(0);
    const all = lines.join('');
    expect(all).not.toContain(password);
    expect(all).not.toContain(token);
    expect(all).not.toContain(token.split('.')[2]);
    expect(device.split('.')).toHaveLength(5);
    expect(all).not.toContain(device.split('.')[4]);
  });
});

describe('log format', () => {
  // Only the configuration is built; no database is opened.
  const config = (env: string) => testConfig(`sqlite:${path.join(tmpdir(), 'never-opened.db')}`, { NODE_ENV: env, LOG_LEVEL: 'info' });
  const tty = process.stdout.isTTY;

  afterEach(() => {
    process.stdout.isTTY = tty;
  });

  it('is readable in development on a terminal, JSON otherwise', () => {
    process.stdout.isTTY = true;
    expect(loggerOptions(config('development'))).toMatchObject({ transport: { target: 'pino-pretty' } });
    expect(loggerOptions(config('production'))).not.toHaveProperty('transport');
    expect(loggerOptions(config('development'), { write: () => {} })).not.toHaveProperty('transport');
    process.stdout.isTTY = false;
    expect(loggerOptions(config('development'))).not.toHaveProperty('transport');
  });

  it('knows whether a package such as pino-pretty can be loaded, so that a production install falls back to JSON', () => {
    expect(isInstalled('pino-pretty')).toBe(true);
    expect(isInstalled(`no-such-package-${process.pid}`)).toBe(false);
  });
});
