import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { deferPerTest, describeEachDatabase, sqliteAppWith, testConfig } from './support/app.js';
import { call, registerUser } from './support/client.js';

const REQUESTS = 'http_request_duration_seconds_count';

async function scrape(app: FastifyInstance): Promise<string> {
  const response = await app.inject({ url: '/metrics' });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return response.body;
}

/** The value of one sample, or undefined when the exposition has no such line. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const labelText = Object.entries(labels)
    .map(([key, value]) => `${key}="${value}"`)
    .join(',');
  const prefix = labelText === '' ? `${name} ` : `${name}{${labelText}} `;
  const line = text.split('\n').find((candidate) => candidate.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

/** Every value the `route` label takes in the request histogram. */
const routeLabels = (text: string) =>
  new Set([...text.matchAll(/^http_request_duration_seconds_count\{[^}]*route="([^"]*)"/gm)].map((match) => match[1]));

describeEachDatabase('metrics', (ctx) => {
  it('counts requests by method, route pattern and status, and times them', async () => {
    const { app } = ctx();
    const user = await registerUser(app, 'metrics');
    await call(app, 'GET', '/api/tags');
    await call(app, 'GET', '/api/articles/first-missing-slug');
    await call(app, 'GET', '/api/articles/second-missing-slug');
    await call(app, 'GET', '/api/user');
    await call(app, 'GET', '/api/user', { token: user.token });
    await call(app, 'GET', '/no/such/route/a');
    await call(app, 'GET', '/no/such/route/b');
    // Refused by the router, before any route: counted all the same.
    await call(app, 'GET', '/api/articles/%E0%A4%A');

    const text = await scrape(app);
    expect(sample(text, REQUESTS, { method: 'POST', route: '/api/users', status_code: '201' })).toBe(1);
    expect(sample(text, REQUESTS, { method: 'GET', route: '/api/tags', status_code: '200' })).toBe(1);
    // Two slugs, one series: the pattern is the label, never the URL.
    expect(sample(text, REQUESTS, { method: 'GET', route: '/api/articles/:slug', status_code: '404' })).toBe(2);
    expect(sample(text, REQUESTS, { method: 'GET', route: '/api/user', status_code: '401' })).toBe(1);
    expect(sample(text, REQUESTS, { method: 'GET', route: '/api/user', status_code: '200' })).toBe(1);
    expect(sample(text, REQUESTS, { method: 'GET', route: '__unknown__', status_code: '404' })).toBe(2);
    expect(sample(text, REQUESTS, { method: 'GET', route: '__unknown__', status_code: '400' })).toBe(1);
    expect(text).not.toContain('missing-slug');
    expect(text).not.toContain('/no/such/route');

    const seconds = sample(text, 'http_request_duration_seconds_sum', { method: 'POST', route: '/api/users', status_code: '201' });
    expect(seconds).toBeGreaterThan(0);
    expect(
      sample(text, 'http_request_duration_seconds_bucket', { le: '+Inf', method: 'GET', route: '/api/tags', status_code: '200' }),
    ).toBe(1);
  });

  it('leaves probes and scrapes out of the request metrics', async () => {
    const { app } = ctx();
    await call(app, 'GET', '/health/live');
    await call(app, 'GET', '/health/ready');
    await scrape(app);
    const routes = routeLabels(await scrape(app));
    expect(routes.size).toBeGreaterThan(0);
    for (const route of routes) expect(route).not.toMatch(/^\/(health|metrics)/);
  });

  it('exports the process metrics, event-loop delay included', async () => {
    const text = await scrape(ctx().app);
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_p99_seconds',
    ]) {
      expect(sample(text, name), name).toBeGreaterThanOrEqual(0);
    }
    expect(text).toMatch(/^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
  });

  it('shows the connections in use and free: the PostgreSQL pool, or the one SQLite connection', async () => {
    const { app } = ctx();
    // A transaction holds one connection for the length of the scrape.
    const inside = await app.db.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      return scrape(app);
    });
    const total = sample(inside, 'db_pool_clients')!;
    expect(total).toBeGreaterThanOrEqual(1);
    expect(total).toBeLessThanOrEqual(10);
    expect(sample(inside, 'db_pool_idle_clients')).toBe(total - 1);
    expect(sample(inside, 'db_pool_waiting_requests')).toBe(0);

    const after = await scrape(app);
    expect(sample(after, 'db_pool_idle_clients')).toBe(sample(after, 'db_pool_clients'));
  });

  it('gives each app its own registry', async () => {
    const { app, databaseUrl } = ctx();
    const before = sample(await scrape(app), REQUESTS, { method: 'GET', route: '/api/tags', status_code: '200' }) ?? 0;
    const other = await buildApp(testConfig(databaseUrl));
    try {
      await call(other, 'GET', '/api/tags');
      await call(other, 'GET', '/api/tags');
      expect(sample(await scrape(other), REQUESTS, { method: 'GET', route: '/api/tags', status_code: '200' })).toBe(2);
      expect(sample(await scrape(app), REQUESTS, { method: 'GET', route: '/api/tags', status_code: '200' }) ?? 0).toBe(before);
    } finally {
      await other.close();
    }
  });
});

describe('who may read /metrics', () => {
  const defer = deferPerTest();
  const TOKEN = 'metrics-token-that-is-long-enough-0123456789';
  const scrapeFrom = (app: FastifyInstance, remoteAddress: string, headers: Record<string, string> = {}) =>
    app.inject({ url: '/metrics', remoteAddress, headers });

  it('answers only clients on this host when METRICS_TOKEN is unset, the probes still to anyone', async () => {
    const app = await sqliteAppWith(defer, {});
    for (const local of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) {
      expect((await scrapeFrom(app, local)).statusCode, local).toBe(200);
    }
    for (const remote of ['192.0.2.1', '10.0.0.5', '::ffff:192.0.2.1', '2001:db8::1']) {
      const response = await scrapeFrom(app, remote);
      expect(response.statusCode, remote).toBe(403);
      expect(response.json()).toEqual({
        errors: { metrics: ['only answered to this host; set METRICS_TOKEN to scrape from elsewhere'] },
      });
      expect(response.body).not.toContain('process_resident_memory_bytes');
    }
    for (const url of ['/health/live', '/health/ready']) {
      expect((await app.inject({ url, remoteAddress: '192.0.2.1' })).statusCode, url).toBe(200);
    }
  });

  it('takes a request relayed by a proxy on this host for a remote one', async () => {
    const app = await sqliteAppWith(defer, {});
    for (const [name, value] of [
      ['x-forwarded-for', '192.0.2.1'],
      ['forwarded', 'for=192.0.2.1'],
      ['x-real-ip', '192.0.2.1'],
    ] as const) {
      expect((await scrapeFrom(app, '127.0.0.1', { [name]: value })).statusCode, name).toBe(403);
    }
  });

  it('asks every client, loopback included, for the METRICS_TOKEN bearer when it is set', async () => {
    const app = await sqliteAppWith(defer, { METRICS_TOKEN: TOKEN });
    const missing = await scrapeFrom(app, '127.0.0.1');
    expect(missing.statusCode).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="metrics"');
    expect(missing.json()).toEqual({ errors: { token: ['is missing'] } });
    for (const authorization of [`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(1)}`, `Token ${TOKEN}`, TOKEN, 'Bearer ']) {
      const refused = await scrapeFrom(app, '127.0.0.1', { authorization });
      expect(refused.statusCode, authorization).toBe(401);
      expect(refused.body).not.toContain('process_resident_memory_bytes');
    }
    for (const authorization of [`Bearer ${TOKEN}x`, `Token ${TOKEN}`]) {
      expect((await scrapeFrom(app, '127.0.0.1', { authorization })).json()).toEqual({ errors: { token: ['is invalid'] } });
    }
    for (const authorization of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`]) {
      const response = await scrapeFrom(app, '192.0.2.1', { authorization, 'x-forwarded-for': '198.51.100.7' });
      expect(response.statusCode, authorization).toBe(200);
      expect(response.body).toContain('process_resident_memory_bytes');
    }
  });
});
