import type { AddressInfo } from 'node:net';
import { createServer, type Server, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { openDatabase } from '../src/db/index.js';
import { installHealthRoutes, READINESS_TIMEOUT_MS } from '../src/plugins/health.js';
import { BEHIND_POOLER, createScratchDatabase, DATABASES, describeEachDatabase, type ScratchDatabase, testConfig } from './support/app.js';
import { call } from './support/client.js';

const UNAVAILABLE = { errors: { database: ['unavailable'] } };

describeEachDatabase('health', (ctx) => {
  it('answers liveness and readiness with 200 outside /api, without a token', async () => {
    for (const url of ['/health/live', '/health/ready']) {
      const response = await call(ctx().app, 'GET', url);
      expect(response.status, url).toBe(200);
      expect(response.body, url).toEqual({ status: 'ok' });
    }
    expect((await call(ctx().app, 'GET', '/api/health/ready')).status).toBe(404);
  });

  it('answers many concurrent readiness probes', async () => {
    const responses = await Promise.all(Array.from({ length: 20 }, () => call(ctx().app, 'GET', '/health/ready')));
    expect(responses.map((response) => response.status)).toEqual(Array(20).fill(200));
  });
});

describe('readiness without a database [sqlite]', () => {
  it('is 503 with the contract body once the database is closed, while liveness stays 200', async () => {
    const scratch = await createScratchDatabase('sqlite');
    const config = testConfig(scratch.url);
    const database = openDatabase(config.database);
    const app = await buildApp(config, { database });
    try {
      expect((await call(app, 'GET', '/health/ready')).status).toBe(200);
      await database.destroy();
      const ready = await call(app, 'GET', '/health/ready');
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual(UNAVAILABLE);
      expect(ready.headers['content-type']).toBe('application/json; charset=utf-8');
      expect((await call(app, 'GET', '/health/live')).status).toBe(200);
    } finally {
      await app.close();
      await scratch.drop();
    }
  });
});

describe.skipIf(!DATABASES.includes('postgres'))('readiness while PostgreSQL refuses connections', () => {
  let scratch: ScratchDatabase | undefined;
  let app: FastifyInstance | undefined;
  let name = '';

  /** Runs statements as the TEST_DATABASE_URL user, from outside the app's pool. */
  const admin = async (...statements: string[]) => {
    const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await client.connect();
    try {
      for (const statement of statements) await client.query(statement);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
    name = new URL(scratch.url).pathname.slice(1);
    app = await buildApp(testConfig(scratch.url));
  });

  afterAll(async () => {
    await admin(`alter database ${name} allow_connections true`).catch(() => {});
    await app?.close();
    await scratch?.drop();
  });

  it('is 503 while the database refuses connections and 200 again once it accepts them', async () => {
    expect((await call(app!, 'GET', '/health/ready')).status).toBe(200);

    // The pool's open connections are cut and no new one is allowed: what the app sees of a database gone away.
    await admin(
      `alter database ${name} allow_connections false`,
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`,
    );
    const down = await call(app!, 'GET', '/health/ready');
    expect(down.status).toBe(503);
    expect(down.body).toEqual(UNAVAILABLE);
    expect((await call(app!, 'GET', '/health/live')).status).toBe(200);

    await admin(`alter database ${name} allow_connections true`);
    const ready = async () => {
      const up = await call(app!, 'GET', '/health/ready');
      expect(up.status).toBe(200);
      expect(up.body).toEqual({ status: 'ok' });
    };
    // Behind the suite's PgBouncer, once it tries PostgreSQL again after the refused logins (server_login_retry).
    await (BEHIND_POOLER ? vi.waitFor(ready, { timeout: 5000, interval: 100 }) : ready());
  });
});

describe('readiness against a PostgreSQL address that does not answer', () => {
  /** A bare app with just the probes: the full app would not start, since it migrates first. */
  async function probesFor(url: string) {
    // A connect timeout longer than the probe's, so that the probe's own timeout is what answers. Three connections
    // for reads (of 4), so that a probe after a hung one can open another rather than wait for the hung one's slot.
    const database = openDatabase({
      kind: 'postgres',
      url,
      poolSize: 4,
      connectTimeoutMs: READINESS_TIMEOUT_MS * 2,
      statementTimeoutMs: 0,
      directUrl: url,
      preparedStatements: true,
    });
    const app = Fastify();
    installHealthRoutes(app, database);
    return {
      app,
      close: async () => {
        await app.close();
        await database.destroy();
      },
    };
  }

  const listen = async (server: Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };

  it('is 503 when nothing listens on the port', async () => {
    const server = createServer();
    const port = await listen(server);
    await new Promise((resolve) => server.close(resolve));

    const { app, close } = await probesFor(`postgres://conduit@127.0.0.1:${port}/conduit`);
    try {
      const ready = await app.inject({ url: '/health/ready' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual(UNAVAILABLE);
      expect((await app.inject({ url: '/health/live' })).statusCode).toBe(200);
    } finally {
      await close();
    }
  });

  it('is 503 within the timeout when the server accepts connections and never answers, one attempt per timeout', async () => {
    const sockets: Socket[] = [];
    const server = createServer((socket) => sockets.push(socket));
    const port = await listen(server);
    const { app, close } = await probesFor(`postgres://conduit@127.0.0.1:${port}/conduit`);
    try {
      const started = Date.now();
      const responses = await Promise.all(Array.from({ length: 5 }, () => app.inject({ url: '/health/ready' })));
      const elapsed = Date.now() - started;
      expect(responses.map((response) => response.statusCode)).toEqual(Array(5).fill(503));
      expect(responses[0]!.json()).toEqual(UNAVAILABLE);
      expect(elapsed).toBeGreaterThanOrEqual(READINESS_TIMEOUT_MS - 50);
      expect(elapsed).toBeLessThan(READINESS_TIMEOUT_MS + 1000);
      expect(sockets).toHaveLength(1);

      // The timed-out attempt is not reused: the next probe tries again, so it would see the database come back.
      expect((await app.inject({ url: '/health/ready' })).statusCode).toBe(503);
      expect(sockets).toHaveLength(2);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
      await close();
    }
  });
});
