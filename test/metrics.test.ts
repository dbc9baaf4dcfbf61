import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { describeEachDatabase, testConfig } from './support/app.js';
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
