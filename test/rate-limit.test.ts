import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { openDatabase } from '../src/db/index.js';
import { placesInRedis, REDIS_LEASE_MS } from '../src/plugins/held-places.js';
import { createScratchDatabase, deferPerTest, type ScratchDatabase, sqliteAppWith, testConfig } from './support/app.js';
import { unique } from './support/client.js';
import { childEnv, freePort, type RunningServer, SERVER_ENTRY, startServer } from './support/processes.js';
import { openStream, type SseStream } from './support/sse.js';

// The counters live in memory or Redis, never in the database: SQLite is enough here.

const RATE_LIMITED = { errors: { rate: ['limit exceeded'] } };
const BAD_CREDENTIALS = { errors: { credentials: ['invalid'] } };
const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

const defer = deferPerTest();
/** An app with every limit off but the ones a test sets (testConfig's load shedding stays off too). */
const appWith = (overrides: Record<string, string>) => sqliteAppWith(defer, overrides);

async function send(
  app: FastifyInstance,
  method: 'GET' | 'POST',
  url: string,
  options: { from?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const response = await app.inject({
    method,
    url,
    remoteAddress: options.from ?? '127.0.0.1',
    headers: options.headers,
    ...(options.body !== undefined && { payload: options.body as object }),
  });
  return { status: response.statusCode, headers: response.headers, body: response.body === '' ? undefined : response.json() };
}

const register = (app: FastifyInstance, name: string, from?: string) =>
  send(app, 'POST', '/api/users', { from, body: { user: { username: name, email: `${name}@example.com`, password: 'password123' } } });
const login = (app: FastifyInstance, email: string, password: string, from?: string, headers?: Record<string, string>) =>
  send(app, 'POST', '/api/users/login', { from, headers, body: { user: { email, password } } });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function expectRateLimited(response: Awaited<ReturnType<typeof send>>, label?: string) {
  expect(response.status, label).toBe(429);
  expect(response.body, label).toEqual(RATE_LIMITED);
  expect(Number(response.headers['retry-after']), label).toBeGreaterThan(0);
}

describe('general limit per client address', () => {
  it('answers 429 with Retry-After and the contract body past RATE_LIMIT_MAX, on known and unknown routes alike', async () => {
    const app = await appWith({ RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW: '1m' });
    for (let i = 0; i < 3; i++) {
      const response = await send(app, 'GET', '/api/tags');
      expect(response.status).toBe(200);
      expect(response.headers['x-ratelimit-limit']).toBe('3');
      expect(response.headers['x-ratelimit-remaining']).toBe(String(2 - i));
    }
    const refused = await send(app, 'GET', '/api/tags');
    expectRateLimited(refused);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(refused.headers['content-type']).toBe('application/json; charset=utf-8');
    expectRateLimited(await send(app, 'GET', '/api/no-such-route'));
    expectRateLimited(await login(app, 'someone@example.com', 'password123'));
    // A page on another origin may read when to come back.
    const fromBrowser = await app.inject({ url: '/api/tags', headers: { origin: 'https://app.example.com' } });
    expect(fromBrowser.statusCode).toBe(429);
    expect(fromBrowser.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(String(fromBrowser.headers['access-control-expose-headers']).toLowerCase()).toContain('retry-after');
  });

  it('counts each client address on its own', async () => {
    const app = await appWith({ RATE_LIMIT_MAX: '2' });
    for (let i = 0; i < 2; i++) expect((await send(app, 'GET', '/api/tags', { from: '203.0.113.1' })).status).toBe(200);
    expectRateLimited(await send(app, 'GET', '/api/tags', { from: '203.0.113.1' }));
    expect((await send(app, 'GET', '/api/tags', { from: '203.0.113.2' })).status).toBe(200);
  });

  it('never limits the health probes and /metrics', async () => {
    const app = await appWith({ RATE_LIMIT_MAX: '1' });
    await send(app, 'GET', '/api/tags');
    expectRateLimited(await send(app, 'GET', '/api/tags'));
    for (const url of ['/health/live', '/health/ready', '/metrics', '/health/live', '/metrics']) {
      const response = await app.inject({ url });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['x-ratelimit-limit'], url).toBeUndefined();
    }
  });

  it('lets requests through again once the window has passed', async () => {
    const app = await appWith({ RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW: '1' });
    await send(app, 'GET', '/api/tags');
    await send(app, 'GET', '/api/tags');
    expectRateLimited(await send(app, 'GET', '/api/tags'));
    await sleep(1100);
    expect((await send(app, 'GET', '/api/tags')).status).toBe(200);
  });

  it('is off with RATE_LIMIT_MAX=0', async () => {
    const app = await appWith({ RATE_LIMIT_MAX: '0' });
    for (let i = 0; i < 50; i++) {
      const response = await send(app, 'GET', '/api/tags');
      expect(response.status).toBe(200);
      expect(response.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });

  it('takes the client address from X-Forwarded-For only when TRUST_PROXY says whom to believe', async () => {
    const forwardedFor = (address: string) => ({ 'x-forwarded-for': address });
    const direct = await appWith({ RATE_LIMIT_MAX: '1' });
    const proxied = await appWith({ RATE_LIMIT_MAX: '1', TRUST_PROXY: '127.0.0.1' });
    for (const [app, secondClientPasses] of [
      [direct, false],
      [proxied, true],
    ] as const) {
      expect((await app.inject({ url: '/api/tags', headers: forwardedFor('198.51.100.1') })).statusCode).toBe(200);
      const other = await app.inject({ url: '/api/tags', headers: forwardedFor('198.51.100.2') });
      expect(other.statusCode).toBe(secondClientPasses ? 200 : 429);
    }
  });
});

describe('write budget per account', () => {
  const write = (app: FastifyInstance, token: string, body: unknown, from: string) =>
    app.inject({
      method: 'POST',
      url: '/api/articles',
      remoteAddress: from,
      headers: { authorization: `Token ${token}` },
      payload: body as object,
    });

  it('refuses an account past WRITE_RATE_LIMIT_MAX writes from any address, before its body is validated; reads and others go on', async () => {
    const app = await appWith({ WRITE_RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW: '1m' });
    const tokenOf = async (name: string) => (await register(app, name)).body.user.token as string;
    const [writer, bystander] = [await tokenOf('writer'), await tokenOf('bystander')];
    const article = { article: { title: 'T', description: 'd', body: 'b' } };
    for (let i = 0; i < 3; i++) expect((await write(app, writer, article, `198.51.100.${i + 1}`)).statusCode).toBe(201);
    // A body that would be a 422 is refused before anyone looks at it.
    const refused = await write(app, writer, { article: { tagList: new Array(100_000).fill('') } }, '198.51.100.9');
    expect([refused.statusCode, refused.json()]).toEqual([429, RATE_LIMITED]);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    const read = await app.inject({ url: '/api/user', headers: { authorization: `Token ${writer}` } });
    expect(read.statusCode).toBe(200);
    expect((await write(app, bystander, article, '198.51.100.1')).statusCode).toBe(201);
  });

  it('charges a unit more per 64 KiB of body, so an account cannot make the server parse megabytes a minute', async () => {
    const app = await appWith({ WRITE_RATE_LIMIT_MAX: '20', RATE_LIMIT_WINDOW: '1m' });
    const token = (await register(app, 'bulky')).body.user.token as string;
    // 640 KiB of body: 1 + 10 units; twice would be 22.
    const bulky = { article: { title: 'T', description: 'd', body: 'b'.repeat(640 * 1024) } };
    expect((await write(app, token, bulky, '198.51.100.1')).statusCode).toBe(422); // over 100,000 characters: spent all the same
    const refused = await write(app, token, bulky, '198.51.100.2');
    expect([refused.statusCode, refused.json()]).toEqual([429, RATE_LIMITED]);
    // 9 units remain for small writes.
    for (let i = 0; i < 9; i++) {
      expect((await write(app, token, { article: { title: `T${i}`, description: 'd', body: 'b' } }, '198.51.100.3')).statusCode).toBe(201);
    }
    expectRateLimited(
      await write(app, token, { article: { title: 'one more', description: 'd', body: 'b' } }, '198.51.100.3').then((response) => ({
        status: response.statusCode,
        headers: response.headers,
        body: response.json(),
      })),
    );
  });

  it('charges a compressed body as the largest allowed, since its size is known only once decoded', async () => {
    const app = await appWith({ WRITE_RATE_LIMIT_MAX: '20', RATE_LIMIT_WINDOW: '1m' });
    const token = (await register(app, 'zipper')).body.user.token as string;
    const send = (title: string) =>
      app.inject({
        method: 'POST',
        url: '/api/articles',
        headers: { authorization: `Token ${token}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
        payload: gzipSync(JSON.stringify({ article: { title, description: 'd', body: 'b' } })),
      });
    expect((await send('first')).statusCode).toBe(201);
    expect((await send('second')).statusCode).toBe(429);
  });
});

describe('login guard per account', () => {
  const limits = { AUTH_RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_WINDOW: '15m' };

  it('refuses an account after AUTH_RATE_LIMIT_MAX failed logins, even with the right password and from elsewhere', async () => {
    const app = await appWith(limits);
    expect((await register(app, 'target')).status).toBe(201);
    expect((await register(app, 'bystander')).status).toBe(201);
    for (let i = 0; i < 3; i++) {
      const failed = await login(app, 'target@example.com', 'wrong-password', `198.51.100.${i + 1}`);
      expect(failed.status).toBe(401);
      expect(failed.body).toEqual(BAD_CREDENTIALS);
    }
    const refused = await login(app, 'target@example.com', 'password123', '198.51.100.99');
    expectRateLimited(refused);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(14 * 60);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(15 * 60);
    // The account is the email whatever its case; other accounts are not affected.
    expectRateLimited(await login(app, 'TARGET@Example.com', 'password123'));
    expect((await login(app, 'bystander@example.com', 'password123')).status).toBe(200);
  });

  it('checks no more than AUTH_RATE_LIMIT_MAX passwords when 40 guesses arrive at once from 40 addresses', async () => {
    const app = await appWith(limits);
    await register(app, 'besieged');
    const guesses = await Promise.all(
      Array.from({ length: 40 }, (_, i) => login(app, 'besieged@example.com', `guess-${i}`, `203.0.113.${i + 1}`)),
    );
    expect(guesses.filter((guess) => guess.status === 401)).toHaveLength(3);
    for (const refused of guesses.filter((guess) => guess.status !== 401)) expectRateLimited(refused);
    expectRateLimited(await login(app, 'besieged@example.com', 'password123'));
  });

  it('counts failures for unknown emails the same way', async () => {
    const app = await appWith(limits);
    for (let i = 0; i < 3; i++) expect((await login(app, 'ghost@example.com', 'password123')).status).toBe(401);
    expectRateLimited(await login(app, 'ghost@example.com', 'password123'));
  });

  it('does not count successful logins', async () => {
    const app = await appWith(limits);
    await register(app, 'regular');
    for (let i = 0; i < 6; i++) expect((await login(app, 'regular@example.com', 'password123')).status).toBe(200);
    expect((await login(app, 'regular@example.com', 'wrong-password')).status).toBe(401);
    expect((await login(app, 'regular@example.com', 'password123')).status).toBe(200);
  });

  it('lets the account log in again once the window has passed', async () => {
    const app = await appWith({ AUTH_RATE_LIMIT_MAX: '1', AUTH_RATE_LIMIT_WINDOW: '2' });
    await register(app, 'patient');
    expect((await login(app, 'patient@example.com', 'wrong-password')).status).toBe(401);
    expectRateLimited(await login(app, 'patient@example.com', 'password123'));
    await sleep(2100);
    expect((await login(app, 'patient@example.com', 'password123')).status).toBe(200);
  });
});

const MINUTE = 60_000;

/** The clock of every counter, moved by hand: minutes of an attack pass in a moment. Real again after the test. */
function fakeClock(): (ms: number) => void {
  vi.useFakeTimers({ toFake: ['Date'] });
  defer(async () => vi.useRealTimers());
  const start = Date.now();
  return (ms) => vi.setSystemTime(start + ms);
}

const knownDevice = (response: Awaited<ReturnType<typeof send>>) => {
  expect(response.status).toBe(200);
  return { 'known-device': String(response.headers['known-device']) };
};

/**
 * An attacker who knows the owner's email sends a wrong password every 6 seconds (10 a minute) for 30 minutes from
 * ever-changing addresses; the owner, signed in once before, logs in every minute from that device. Answers the
 * passwords the attacker had checked in each 15-minute window, and how long the owner was kept out.
 */
async function siege(app: FastifyInstance) {
  const at = fakeClock();
  expect((await register(app, 'owner')).status).toBe(201);
  let device = knownDevice(await login(app, 'owner@example.com', 'password123', '198.51.100.1'));
  const checkedPerWindow = [0, 0];
  let lockedOutMs = 0;
  let lockedOutSince: number | null = null;
  for (let second = 0; second < 30 * 60; second += 6) {
    at(second * 1000);
    const guess = await login(app, 'owner@example.com', `guess-${second}`, `203.0.113.${(second % 250) + 1}`);
    if (guess.status === 401) checkedPerWindow[Math.floor(second / (15 * 60))]! += 1;
    else expectRateLimited(guess, `guess at ${second} s`);
    if (second % 60 !== 0) continue;
    at(second * 1000 + 3000);
    const owners = await login(app, 'owner@example.com', 'password123', '198.51.100.1', device);
    if (owners.status === 200) {
      if (lockedOutSince !== null) lockedOutMs += Date.now() - lockedOutSince;
      lockedOutSince = null;
      device = knownDevice(owners);
    } else {
      expectRateLimited(owners, `owner at ${second} s`);
      lockedOutSince ??= Date.now();
    }
  }
  // A client that does not send the value back (a new device, a page on another origin that kept no header) is
  // counted like anyone else, and is locked out with them.
  at(30 * MINUTE - 1000);
  expectRateLimited(await login(app, 'owner@example.com', 'password123', '198.51.100.2'));
  at(30 * MINUTE);
  if (lockedOutSince !== null) lockedOutMs += Date.now() - lockedOutSince;
  return { checkedPerWindow, lockedOutMs };
}

describe('known devices past the login guard', () => {
  it('an attacker at 10 tries a minute for 30 minutes keeps the owner out for 0 s and gets 10 guesses per 15 minutes', async () => {
    const app = await appWith({ AUTH_RATE_LIMIT_MAX: '10', AUTH_RATE_LIMIT_WINDOW: '15m' });
    expect(await siege(app)).toEqual({ checkedPerWindow: [10, 10], lockedOutMs: 0 });
  });

  it("counts a device's failures apart: a stolen value gets the limit in guesses, even at once; other devices and strangers are untouched", async () => {
    const app = await appWith({ AUTH_RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_WINDOW: '15m' });
    await register(app, 'owner');
    const stolen = knownDevice(await login(app, 'owner@example.com', 'password123'));
    const kept = knownDevice(await login(app, 'owner@example.com', 'password123'));
    const guesses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => login(app, 'owner@example.com', `guess-${i}`, `203.0.113.${i + 1}`, stolen)),
    );
    expect(guesses.filter((guess) => guess.status === 401)).toHaveLength(3);
    for (const refused of guesses.filter((guess) => guess.status !== 401)) expectRateLimited(refused);
    expectRateLimited(await login(app, 'owner@example.com', 'password123', undefined, stolen));
    expect((await login(app, 'owner@example.com', 'password123', undefined, kept)).status).toBe(200);
    expect((await login(app, 'owner@example.com', 'password123')).status).toBe(200);
  });

  it('travels as a header and as an HttpOnly, SameSite=Strict cookie for the login route only, Secure over https', async () => {
    const app = await appWith({ AUTH_RATE_LIMIT_MAX: '1', KNOWN_DEVICE_EXPIRES_IN: '30d', TRUST_PROXY: '127.0.0.1' });
    await register(app, 'owner');
    const plain = await login(app, 'owner@example.com', 'password123');
    const value = knownDevice(plain)['known-device'];
    expect(value.length).toBeLessThanOrEqual(256);
    expect(plain.headers['set-cookie']).toBe(
      `conduit_device=${value}; Path=/api/users/login; Max-Age=${30 * 86400}; HttpOnly; SameSite=Strict`,
    );
    const overHttps = await login(app, 'owner@example.com', 'password123', undefined, { 'x-forwarded-proto': 'https' });
    expect(String(overHttps.headers['set-cookie'])).toMatch(/; HttpOnly; SameSite=Strict; Secure$/);
    // Locked for everyone but the device.
    expect((await login(app, 'owner@example.com', 'wrong-password', '203.0.113.1')).status).toBe(401);
    expectRateLimited(await login(app, 'owner@example.com', 'password123'));
    const cookie = { cookie: `theme=dark; conduit_device=${value}` };
    expect((await login(app, 'owner@example.com', 'password123', undefined, cookie)).status).toBe(200);
    // A page on another origin may send it and read the new one.
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/users/login',
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'known-device',
      },
    });
    expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('known-device');
    const fromPage = await login(app, 'owner@example.com', 'password123', undefined, {
      origin: 'https://app.example.com',
      'known-device': value,
    });
    expect(fromPage.status).toBe(200);
    expect(String(fromPage.headers['access-control-expose-headers']).toLowerCase()).toContain('known-device');
  });

  it("is counted like a stranger's login when forged, expired, for another account, or from before a password change", async () => {
    const app = await appWith({ AUTH_RATE_LIMIT_MAX: '1', AUTH_RATE_LIMIT_WINDOW: '2h', KNOWN_DEVICE_EXPIRES_IN: '1h' });
    const at = fakeClock();
    await register(app, 'owner');
    await register(app, 'other');
    const before = await login(app, 'owner@example.com', 'password123');
    const beforeChange = knownDevice(before);
    const change = await app.inject({
      method: 'PUT',
      url: '/api/user',
      headers: { authorization: `Token ${before.body.user.token}` },
      payload: { user: { password: 'password456' } },
    });
    expect(change.statusCode).toBe(200);
    const current = knownDevice(await login(app, 'owner@example.com', 'password456'));
    const others = knownDevice(await login(app, 'other@example.com', 'password123'));
    const value = current['known-device'];
    const signatureAt = value.lastIndexOf('.') + 1;
    const otherSignature = {
      'known-device': `${value.slice(0, signatureAt)}${value[signatureAt] === 'A' ? 'B' : 'A'}${value.slice(signatureAt + 1)}`,
    };
    const otherAccount = { 'known-device': value.replace(/^\d+\./, `${others['known-device'].split('.')[0]}.`) };

    expect((await login(app, 'owner@example.com', 'wrong-password', '203.0.113.1')).status).toBe(401);
    for (const [label, headers] of Object.entries({ beforeChange, others, otherSignature, otherAccount })) {
      expectRateLimited(await login(app, 'owner@example.com', 'password456', undefined, headers), label);
    }
    expect((await login(app, 'owner@example.com', 'password456', undefined, current)).status).toBe(200);
    at(61 * MINUTE);
    expectRateLimited(await login(app, 'owner@example.com', 'password456', undefined, current), 'expired');
  });

  it('refuses a Known-Device header longer than any value handed out with 422', async () => {
    const app = await appWith({});
    const response = await login(app, 'owner@example.com', 'password123', undefined, { 'known-device': 'a'.repeat(257) });
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors)).toEqual(['known-device']);
  });
});

describe('registration and login guard per client address', () => {
  it('refuses registrations and logins from an address past AUTH_ADDRESS_RATE_LIMIT_MAX, whatever their outcome', async () => {
    const app = await appWith({ AUTH_ADDRESS_RATE_LIMIT_MAX: '3' });
    const from = '192.0.2.10';
    expect((await register(app, 'first', from)).status).toBe(201);
    expect((await login(app, 'first@example.com', 'password123', from)).status).toBe(200);
    expect((await register(app, 'first', from)).status).toBe(409);
    expectRateLimited(await register(app, 'fourth', from));
    expectRateLimited(await login(app, 'first@example.com', 'password123', from));
    // Other routes and other addresses are not affected.
    expect((await send(app, 'GET', '/api/tags', { from })).status).toBe(200);
    expect((await register(app, 'elsewhere', '192.0.2.11')).status).toBe(201);
  });
});

/** Whether Redis answers at `url`; the reason when it does not. */
async function redisProblem(url: string): Promise<string | null> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
    return null;
  } catch (error) {
    return `Redis does not answer at ${url} (${(error as Error).message})`;
  } finally {
    client.disconnect();
  }
}

const noRedis = await redisProblem(REDIS_URL);
// Locally a missing Redis is a reason to skip, said out loud; in CI it must fail, never pass unseen.
if (noRedis !== null && !process.env.CI) console.warn(`\n[conduit] Redis rate-limit tests SKIPPED: ${noRedis}\n`);

/** A TCP relay to Redis that a test can cut, standing in for a Redis outage. */
async function relayToRedis(): Promise<{ url: string; open: () => number; cut: () => Promise<void> }> {
  const target = new URL(REDIS_URL);
  const sockets = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
  const cut = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => relay.close(resolve));
  };
  defer(() => (relay.listening ? cut() : Promise.resolve()));
  const url = new URL(REDIS_URL);
  url.host = `127.0.0.1:${port}`;
  // Each relayed connection is two sockets: the client's and the one to Redis.
  return { url: url.toString(), open: () => sockets.size / 2, cut };
}

describe.skipIf(noRedis !== null && !process.env.CI)('limits shared through Redis', () => {
  const shared = () => {
    if (noRedis !== null) throw new Error(`${noRedis}; CI must provide it`);
    return { REDIS_URL, REDIS_KEY_PREFIX: `conduit-test-${randomBytes(6).toString('hex')}:` };
  };

  it('counts requests across two instances sharing REDIS_URL', async () => {
    const settings = { ...shared(), RATE_LIMIT_MAX: '4' };
    const [a, b] = [await appWith(settings), await appWith(settings)];
    for (const app of [a, b, a, b]) expect((await send(app, 'GET', '/api/tags')).status).toBe(200);
    expectRateLimited(await send(a, 'GET', '/api/tags'));
    expectRateLimited(await send(b, 'GET', '/api/tags'));
    // Another prefix is another set of counters.
    const separate = await appWith({ ...settings, REDIS_KEY_PREFIX: `${settings.REDIS_KEY_PREFIX}other:` });
    expect((await send(separate, 'GET', '/api/tags')).status).toBe(200);
  });

  it('counts failed logins for an account across instances, and lets it in again after the window', async () => {
    const settings = { ...shared(), AUTH_RATE_LIMIT_MAX: '2', AUTH_RATE_LIMIT_WINDOW: '2' };
    const [a, b] = [await appWith(settings), await appWith(settings)];
    expect((await login(a, 'ghost@example.com', 'password123')).status).toBe(401);
    expect((await login(b, 'ghost@example.com', 'password123')).status).toBe(401);
    expectRateLimited(await login(a, 'ghost@example.com', 'password123'));
    expectRateLimited(await login(b, 'ghost@example.com', 'password123'));
    await sleep(2100);
    expect((await login(b, 'ghost@example.com', 'password123')).status).toBe(401);
  });

  it('checks no more than AUTH_RATE_LIMIT_MAX passwords for guesses sent at once to two instances', async () => {
    const settings = { ...shared(), AUTH_RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_WINDOW: '15m' };
    const [a, b] = [await appWith(settings), await appWith(settings)];
    const guesses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => login(i % 2 === 0 ? a : b, 'ghost@example.com', `guess-${i}`, `203.0.113.${i + 1}`)),
    );
    expect(guesses.filter((guess) => guess.status === 401)).toHaveLength(3);
    for (const refused of guesses.filter((guess) => guess.status !== 401)) expectRateLimited(refused);
  });

  it('gives a successful login its attempt back in Redis', async () => {
    const app = await appWith({ ...shared(), AUTH_RATE_LIMIT_MAX: '2', AUTH_RATE_LIMIT_WINDOW: '15m' });
    expect((await register(app, 'regular')).status).toBe(201);
    for (let i = 0; i < 4; i++) expect((await login(app, 'regular@example.com', 'password123')).status).toBe(200);
    expect((await login(app, 'regular@example.com', 'wrong-password')).status).toBe(401);
    expect((await login(app, 'regular@example.com', 'password123')).status).toBe(200);
    expect((await login(app, 'regular@example.com', 'wrong-password')).status).toBe(401);
    expectRateLimited(await login(app, 'regular@example.com', 'password123'));
  });

  it("keeps a known device's owner signed in through a 30-minute attack, with the attacker's guesses counted in Redis", async () => {
    const app = await appWith({ ...shared(), AUTH_RATE_LIMIT_MAX: '10', AUTH_RATE_LIMIT_WINDOW: '15m' });
    expect(await siege(app)).toEqual({ checkedPerWindow: [10, 10], lockedOutMs: 0 });
  });

  it('lets requests through, without waiting, while Redis is unreachable', async () => {
    const relay = await relayToRedis();
    const app = await appWith({ ...shared(), REDIS_URL: relay.url, RATE_LIMIT_MAX: '1' });
    expect(relay.open()).toBe(1);
    expect((await send(app, 'GET', '/api/tags')).status).toBe(200);
    expectRateLimited(await send(app, 'GET', '/api/tags'));

    await relay.cut();
    const started = Date.now();
    for (let i = 0; i < 3; i++) expect((await send(app, 'GET', '/api/tags')).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('closes its Redis connection when the app closes', async () => {
    const relay = await relayToRedis();
    const scratch = await createScratchDatabase('sqlite');
    defer(() => scratch.drop());
    const app = await buildApp(testConfig(scratch.url, { ...shared(), REDIS_URL: relay.url, RATE_LIMIT_MAX: '5' }));
    expect(relay.open()).toBe(1);
    await app.close();
    await expect.poll(relay.open).toBe(0);
  });

  describe('live event streams per client', () => {
    /** A stream from this test's address at the app listening on `base`, open or refused, closed after the test. */
    async function streamAt(base: string): Promise<SseStream> {
      const stream = await openStream(`${base}/api/events`);
      defer(async () => stream.close());
      if (stream.status === 200) await stream.until((messages) => messages.length > 0);
      return stream;
    }
    const listening = async (app: FastifyInstance) => {
      await app.listen({ port: 0, host: '127.0.0.1' });
      return `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
    };

    it('holds a client to EVENT_STREAMS_PER_CLIENT on two instances together, and frees a place when one closes', async () => {
      const settings = { ...shared(), EVENT_STREAMS_PER_CLIENT: '2' };
      const [a, b] = [await listening(await appWith(settings)), await listening(await appWith(settings))];
      const first = await streamAt(a);
      expect([first.status, (await streamAt(b)).status]).toEqual([200, 200]);
      for (const base of [a, b]) {
        const refused = await streamAt(base);
        expect(refused.status).toBe(429);
        expect(await refused.json()).toEqual(RATE_LIMITED);
      }
      first.close();
      // Given back once instance a has seen the stream go.
      await vi.waitFor(async () => expect((await streamAt(b)).status).toBe(200), { timeout: 5000, interval: 100 });
      expect((await streamAt(a)).status).toBe(429);
    });

    it('lets the places of an instance killed with streams open lapse with their lease', { timeout: 30_000 }, async () => {
      const settings = { ...shared(), EVENT_STREAMS_PER_CLIENT: '2' };
      const scratch = await createScratchDatabase('sqlite');
      defer(() => scratch.drop());
      const killed = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, settings));
      defer(() => killed.stop('SIGKILL'));
      expect([(await streamAt(killed.base)).status, (await streamAt(killed.base)).status]).toEqual([200, 200]);
      await killed.stop('SIGKILL');

      const survivor = await listening(await appWith(settings));
      expect((await streamAt(survivor)).status).toBe(429);
      // A lease later, on the clock the instances count by, nothing has renewed the dead instance's places.
      const now = Date.now;
      const later = vi.spyOn(Date, 'now').mockImplementation(() => now() + REDIS_LEASE_MS);
      onTestFinished(() => later.mockRestore());
      expect((await streamAt(survivor)).status).toBe(200);
    });

    it('renews the places a live instance holds, past their lease', async () => {
      const redis = new Redis(REDIS_URL);
      defer(async () => redis.disconnect());
      const { REDIS_KEY_PREFIX } = shared();
      const leaseMs = 600;
      const [living, other] = [placesInRedis(redis, REDIS_KEY_PREFIX, leaseMs), placesInRedis(redis, REDIS_KEY_PREFIX, leaseMs)];
      defer(async () => {
        living.close();
        other.close();
      });
      const giveBack = await living.take('203.0.113.1', 1);
      expect(giveBack).not.toBeNull();
      await sleep(3 * leaseMs);
      expect(await other.take('203.0.113.1', 1)).toBeNull();
      giveBack!();
      expect(await other.take('203.0.113.1', 1)).not.toBeNull();
    });

    it('lets streams open uncounted while Redis is unreachable', async () => {
      const relay = await relayToRedis();
      const app = await listening(await appWith({ ...shared(), REDIS_URL: relay.url, EVENT_STREAMS_PER_CLIENT: '1' }));
      expect((await streamAt(app)).status).toBe(200);
      expect((await streamAt(app)).status).toBe(429);
      await relay.cut();
      expect((await streamAt(app)).status).toBe(200);
    });
  });

  it('refuses to start when REDIS_URL does not answer', async () => {
    const scratch = await createScratchDatabase('sqlite');
    const database = openDatabase({ kind: 'sqlite', file: scratch.url.slice('sqlite:'.length), synchronous: 'full' });
    defer(async () => {
      await database.destroy();
      await scratch.drop();
    });
    const config = testConfig(scratch.url, { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, RATE_LIMIT_MAX: '5' });
    await expect(buildApp(config, { database })).rejects.toThrow(
      /^REDIS_URL: cannot connect to Redis at 127\.0\.0\.1:\d+ \(connection refused\); /,
    );
  });
});

/** One request on a connection of its own from `from` (any 127/8 address reaches the loopback server). */
function sendOnNewConnection(
  base: string,
  method: string,
  url: string,
  options: { from: string; token?: string; body?: unknown },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: Record<string, string> = {};
  if (payload !== undefined) headers['content-type'] = 'application/json';
  if (options.token !== undefined) headers.authorization = `Token ${options.token}`;
  return new Promise((resolve, reject) => {
    const sent = http.request(new URL(url, base), { method, headers, agent: false, localAddress: options.from }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode!, headers: response.headers, body: text === '' ? undefined : JSON.parse(text) }),
      );
    });
    sent.on('error', reject);
    sent.end(payload);
  });
}

type Answer = Awaited<ReturnType<typeof sendOnNewConnection>>;

/** `count` requests, each sent once the one before was answered. */
async function oneAfterAnother(count: number, send: (index: number) => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < count; i++) answers.push(await send(i));
  return answers;
}

describe('limits shared by the workers of a WORKERS=2 cluster, without Redis', () => {
  let scratch: ScratchDatabase | undefined;
  let server: RunningServer | undefined;
  const LIMITS = { RATE_LIMIT_MAX: '10', WRITE_RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_MAX: '3', AUTH_ADDRESS_RATE_LIMIT_MAX: '4' };
  // The overload guard has tests of its own: a busy machine must not answer these 503 and spoil the counts.
  const STEADY = { OVERLOAD_EVENT_LOOP_DELAY_MS: '0' };

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { ...LIMITS, ...STEADY, WORKERS: '2', LOG_LEVEL: 'info' }));
    // The first worker to listen answers already; the connections are shared out once both do.
    const listening = () => server!.output().match(/Conduit listening on/g)?.length ?? 0;
    await vi.waitFor(() => expect(listening()).toBe(2), { timeout: 20_000, interval: 100 });
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await scratch?.drop();
  });

  /** The pids of the workers that answered these requests, read from their request lines. */
  const workersThatAnswered = (responses: { headers: http.IncomingHttpHeaders }[]) => {
    const ids = new Set(responses.map((response) => response.headers['x-request-id']));
    const lines = server!
      .output()
      .split('\n')
      .filter((line) => line.includes('"request completed"'))
      .map((line) => JSON.parse(line));
    return new Set(lines.filter((line) => ids.has(line.reqId)).map((line) => line.pid));
  };

  it('refuses a client past RATE_LIMIT_MAX requests in all, whichever worker each connection reaches', async () => {
    const responses = await oneAfterAnother(15, () => sendOnNewConnection(server!.base, 'GET', '/api/tags', { from: '127.0.0.2' }));
    expect(responses.map((response) => response.status)).toEqual([...Array(10).fill(200), ...Array(5).fill(429)]);
    // One count for the client, not one per worker.
    const remaining = responses.slice(0, 10).map((response) => Number(response.headers['x-ratelimit-remaining']));
    expect(remaining).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    await vi.waitFor(() => expect(workersThatAnswered(responses).size).toBe(2), { timeout: 5000, interval: 100 });
  });

  it('locks an account out after AUTH_RATE_LIMIT_MAX failed logins in all, sent to both workers', async () => {
    const base = server!.base;
    const name = unique('lockout');
    const user = { username: name, email: `${name}@example.com`, password: 'password123' };
    expect((await sendOnNewConnection(base, 'POST', '/api/users', { from: '127.0.1.1', body: { user } })).status).toBe(201);
    // Each from an address of its own, so that only the account's limit applies.
    const responses = await oneAfterAnother(6, (i) =>
      sendOnNewConnection(base, 'POST', '/api/users/login', {
        from: `127.0.1.${i + 2}`,
        body: { user: { email: user.email, password: `wrong-${i}-password` } },
      }),
    );
    expect(responses.map((response) => response.status)).toEqual([401, 401, 401, 429, 429, 429]);
    const right = { user: { email: user.email, password: user.password } };
    expect((await sendOnNewConnection(base, 'POST', '/api/users/login', { from: '127.0.1.9', body: right })).status).toBe(429);
    await vi.waitFor(() => expect(workersThatAnswered(responses).size).toBe(2), { timeout: 5000, interval: 100 });
  });

  it('holds registrations and logins from one address to AUTH_ADDRESS_RATE_LIMIT_MAX in all', async () => {
    // Each for an account of its own, so that only the address's limit applies.
    const responses = await oneAfterAnother(6, () =>
      sendOnNewConnection(server!.base, 'POST', '/api/users/login', {
        from: '127.0.2.1',
        body: { user: { email: `${unique('nobody')}@example.com`, password: 'password123' } },
      }),
    );
    expect(responses.map((response) => response.status)).toEqual([401, 401, 401, 401, 429, 429]);
    await vi.waitFor(() => expect(workersThatAnswered(responses).size).toBe(2), { timeout: 5000, interval: 100 });
  });

  it("spends an account's WRITE_RATE_LIMIT_MAX once, whichever worker each write reaches", async () => {
    const base = server!.base;
    const name = unique('writer');
    const user = { username: name, email: `${name}@example.com`, password: 'password123' };
    const registered = await sendOnNewConnection(base, 'POST', '/api/users', { from: '127.0.3.1', body: { user } });
    const responses = await oneAfterAnother(5, (i) =>
      sendOnNewConnection(base, 'POST', '/api/articles', {
        from: '127.0.3.1',
        token: registered.body.user.token,
        body: { article: { title: `Budget ${name} ${i}`, description: 'd', body: 'b' } },
      }),
    );
    expect(responses.map((response) => response.status)).toEqual([201, 201, 201, 429, 429]);
    await vi.waitFor(() => expect(workersThatAnswered(responses).size).toBe(2), { timeout: 5000, interval: 100 });
  });

  it('lets requests and event streams through, after a wait, when the primary does not answer; the worker warns once', async () => {
    const worker = fork(path.join(import.meta.dirname, 'support', 'worker-of-silent-primary.mjs'), {
      env: childEnv(scratch!.url, { ...LIMITS, RATE_LIMIT_MAX: '1', EVENT_STREAMS_PER_CLIENT: '1', LOG_LEVEL: 'warn' }),
      stdio: 'ignore',
    });
    onTestFinished(() => {
      worker.kill('SIGKILL');
    });
    type Report = { statuses: number[]; streams: number[]; tookMs: number; warnings: number };
    const report = await new Promise<Report>((resolve, reject) => {
      // Its spends and takes arrive here too, and go unanswered.
      worker.on('message', (message: { report?: Report }) => {
        if (message.report) resolve(message.report);
      });
      worker.on('exit', (code) => reject(new Error(`the worker exited with ${code} before reporting`)));
    });
    // Over the limit of 1, yet served: a stuck primary must not turn into an outage of every worker.
    expect(report.statuses).toEqual([200, 200]);
    expect(report.streams).toEqual([200, 200]);
    expect(report.tookMs).toBeGreaterThanOrEqual(2 * 500);
    expect(report.warnings).toBe(1);
  });
});
