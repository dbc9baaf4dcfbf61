import type { AddressInfo } from 'node:net';
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { deferPerTest, sqliteAppWith } from './support/app.js';

const OVERLOADED = { errors: { server: ['overloaded, retry later'] } };

const defer = deferPerTest();
const appWith = (overrides: Record<string, string>) => sqliteAppWith(defer, overrides);

/** Keeps the event loop busy in slices, as a process falling behind its work would, yielding between slices. */
async function hogEventLoop(totalMs: number, sliceMs: number): Promise<void> {
  const end = Date.now() + totalMs;
  while (Date.now() < end) {
    const sliceEnd = Date.now() + sliceMs;
    while (Date.now() < sliceEnd) {
      // Busy on purpose.
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const status = async (app: FastifyInstance, url: string) => (await app.inject({ url })).statusCode;

describe('overload', () => {
  it('answers 503 with Retry-After past OVERLOAD_RSS_MB, and still answers the probes and /metrics', async () => {
    // Every process uses more than 1 MiB: the first sample (within a second) finds it over.
    const app = await appWith({ OVERLOAD_RSS_MB: '1' });
    await expect.poll(() => status(app, '/api/tags'), { timeout: 3000 }).toBe(503);
    for (const url of ['/api/tags', '/api/articles', '/api/no-such-route']) {
      const response = await app.inject({ url });
      expect(response.statusCode, url).toBe(503);
      expect(response.json(), url).toEqual(OVERLOADED);
      expect(response.headers['retry-after'], url).toBe('5');
      expect(response.headers['content-type'], url).toBe('application/json; charset=utf-8');
    }
    for (const url of ['/health/live', '/health/ready', '/metrics']) expect(await status(app, url), url).toBe(200);
  });

  it('sheds the client causing the load and keeps answering the others', async () => {
    const app = await appWith({ OVERLOAD_RSS_MB: '1' });
    const from = async (remoteAddress: string) => (await app.inject({ url: '/api/tags', remoteAddress })).statusCode;
    await expect.poll(() => from('203.0.113.66'), { timeout: 3000 }).toBe(503);
    // The flood: this address is the busiest, and every request of it is refused.
    const flood = await Promise.all(Array.from({ length: 50 }, () => from('203.0.113.66')));
    expect(new Set(flood)).toEqual(new Set([503]));
    // Clients sending a fraction of that are served all the while.
    for (const bystander of ['198.51.100.1', '198.51.100.2', '2001:db8::1']) expect(await from(bystander), bystander).toBe(200);
  });

  it('answers 503 while the event loop lags past OVERLOAD_EVENT_LOOP_DELAY_MS, and serves again once it catches up', async () => {
    const app = await appWith({ OVERLOAD_EVENT_LOOP_DELAY_MS: '50' });
    expect(await status(app, '/api/tags')).toBe(200);
    // Delay is sampled as the mean over each second: 2.5 s of 100 ms slices fill at least one sample with lag.
    await hogEventLoop(2500, 100);
    const refused = await app.inject({ url: '/api/tags' });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toEqual(OVERLOADED);
    expect(await status(app, '/health/live')).toBe(200);
    await expect.poll(() => status(app, '/api/tags'), { timeout: 3000, interval: 200 }).toBe(200);
  });
});

/** A raw connection, to send requests as slowly as a test wants. */
function connect(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => (received += chunk));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
  return { socket, closed, received: () => received };
}

/**
 * Sends `head`, then one more character every 100 ms so that the connection never goes quiet, until the server
 * closes it; how long that took and what the server sent.
 */
async function sendSlowly(port: number, head: string): Promise<{ elapsedMs: number; received: string }> {
  const client = connect(port);
  const started = Date.now();
  client.socket.write(head);
  const timer = setInterval(() => client.socket.writable && client.socket.write('a'), 100);
  const closedAt = await client.closed;
  clearInterval(timer);
  return { elapsedMs: closedAt - started, received: client.received() };
}

describe('timeouts against slow clients', () => {
  const listening = async (overrides: Record<string, string>) => {
    const app = await appWith(overrides);
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { app, port: (app.server.address() as AddressInfo).port };
  };

  it('gives the server the configured timeouts', async () => {
    const { app } = await listening({ HEADERS_TIMEOUT: '7', REQUEST_TIMEOUT: '20', KEEP_ALIVE_TIMEOUT: '65', CONNECTION_TIMEOUT: '45' });
    expect(app.server).toMatchObject({ headersTimeout: 7000, requestTimeout: 20_000, keepAliveTimeout: 65_000, timeout: 45_000 });
  });

  it('closes a connection whose headers are still arriving after HEADERS_TIMEOUT, with a 408', async () => {
    const { port } = await listening({ HEADERS_TIMEOUT: '1', REQUEST_TIMEOUT: '10' });
    const { elapsedMs, received } = await sendSlowly(port, 'GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    // Timeouts are checked every second: closed between 1 and 2 s (plus slack for a busy machine), long before
    // the 10 s request timeout, although the client never went quiet.
    expect(elapsedMs).toBeGreaterThanOrEqual(900);
    expect(elapsedMs).toBeLessThan(3500);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('closes a connection whose body is still arriving after REQUEST_TIMEOUT, with a 408', async () => {
    const { port } = await listening({ HEADERS_TIMEOUT: '1', REQUEST_TIMEOUT: '2' });
    const head =
      'POST /api/users/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":"';
    const { elapsedMs, received } = await sendSlowly(port, head);
    expect(elapsedMs).toBeGreaterThanOrEqual(1900);
    expect(elapsedMs).toBeLessThan(4500);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('closes an idle kept-alive connection after KEEP_ALIVE_TIMEOUT', async () => {
    const { port } = await listening({ KEEP_ALIVE_TIMEOUT: '1' });
    const client = connect(port);
    client.socket.write('GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await expect.poll(client.received).toMatch(/\r\n\r\n\{"tags":\[\]\}$/);
    const answered = Date.now();
    expect(client.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(client.received()).toMatch(/\r\nKeep-Alive: timeout=1\r\n/i);
    // Node keeps the socket a second past the timeout it announces, so a client reusing it just in time is not cut off.
    const idle = (await client.closed) - answered;
    expect(idle).toBeGreaterThanOrEqual(900);
    expect(idle).toBeLessThan(3500);
  });
});
