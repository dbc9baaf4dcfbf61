import { existsSync } from 'node:fs';
import http from 'node:http';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BEHIND_POOLER, createScratchDatabase, DATABASES, type ScratchDatabase, withAdmin } from './support/app.js';
import { unique } from './support/client.js';
import { childEnv, type RunningServer, request, SERVER_ENTRY, startServer } from './support/processes.js';

const IN_FLIGHT = 50;
const EXIT_WITHIN_MS = 10_000;

interface Load {
  id: string;
  method: string;
  url: string;
  body?: unknown;
  token?: string;
  /** The status the request gets from a server that is not shutting down. */
  expected: number;
  /** Registrations, to find them in the database afterwards. */
  username?: string;
}

/**
 * Fifty requests of four kinds; the registrations and logins hash a password with argon2 (tens of milliseconds
 * each, more when fifty compete for two cores), so many are still running when the signal comes.
 */
function loadFor(user: { email: string; password: string; token: string }): Load[] {
  return Array.from({ length: IN_FLIGHT }, (_, i): Load => {
    const id = `inflight-${i}`;
    switch (i % 5) {
      case 0:
      case 1: {
        const username = unique('drain');
        const body = { user: { username, email: `${username}@example.com`, password: 'password123' } };
        return { id, method: 'POST', url: '/api/users', body, expected: 201, username };
      }
      case 2:
        return {
          id,
          method: 'POST',
          url: '/api/users/login',
          body: { user: { email: user.email, password: user.password } },
          expected: 200,
        };
      case 3:
        return { id, method: 'GET', url: '/api/articles?limit=5', expected: 200 };
      default:
        return {
          id,
          method: 'POST',
          url: '/api/articles',
          token: user.token,
          body: { article: { title: `Draining ${i}`, description: 'During shutdown', body: 'Finished anyway' } },
          expected: 201,
        };
    }
  });
}

async function send(base: string, load: Load): Promise<{ status: number; finishedAt: number }> {
  const headers: Record<string, string> = { 'x-request-id': load.id };
  if (load.token) headers.authorization = `Token ${load.token}`;
  if (load.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${load.url}`, {
    method: load.method,
    headers,
    ...(load.body !== undefined && { body: JSON.stringify(load.body) }),
  });
  await response.arrayBuffer();
  return { status: response.status, finishedAt: Date.now() };
}

/** A request on a connection of its own: never one the server accepted before it was told to stop. */
function onNewConnection(base: string): Promise<number | 'refused'> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const sent = http.get({ hostname, port, path: '/api/tags', agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    sent.on('error', () => resolve('refused'));
  });
}

/** Polls the server's log often: the moment something shows there is the moment that matters. */
const WATCH = { timeout: 10_000, interval: 5 };

/**
 * Connections to the database open anywhere (the test's own admin connection is to another database). Behind the
 * suite's pooler, those of its clients: its own connections to PostgreSQL stay open for the next ones.
 */
async function connectionsTo(databaseUrl: string): Promise<number> {
  const name = new URL(databaseUrl).pathname.slice(1);
  if (!BEHIND_POOLER) {
    return withAdmin(async (client) => {
      const { rows } = await client.query<{ count: string }>('select count(*) from pg_stat_activity where datname = $1', [name]);
      return Number(rows[0]?.count);
    });
  }
  // PgBouncer's console, a database of its own named pgbouncer, answers simple queries only: no parameters.
  const pooler = new URL(databaseUrl);
  pooler.pathname = '/pgbouncer';
  const client = new pg.Client({ connectionString: pooler.toString() });
  await client.connect();
  try {
    const { rows } = await client.query<{ database: string }>('show clients');
    return rows.filter((row) => row.database === name).length;
  } finally {
    await client.end();
  }
}

/** Usernames from the list that have an account, read straight from the database the server used. */
async function storedUsernames(databaseUrl: string, usernames: string[]): Promise<string[]> {
  if (databaseUrl.startsWith('sqlite:')) {
    const file = databaseUrl.slice('sqlite:'.length);
    // Exclusive: nothing else may still hold the file.
    const database = new BetterSqlite3(file, { fileMustExist: true });
    try {
      database.pragma('locking_mode = EXCLUSIVE');
      database.exec('begin exclusive');
      const rows = database
        .prepare(`select username from users where username in (${usernames.map(() => '?').join(',')})`)
        .all(...usernames);
      database.exec('commit');
      return (rows as Array<{ username: string }>).map((row) => row.username);
    } finally {
      database.close();
    }
  }
  return withAdmin(async (client) => {
    const { rows } = await client.query<{ username: string }>('select username from users where username = any($1)', [usernames]);
    return rows.map((row) => row.username);
  }, databaseUrl);
}

for (const kind of DATABASES) {
  describe(`graceful shutdown of node dist/server.js [${kind}]`, () => {
    let scratch: ScratchDatabase | undefined;
    let server: RunningServer | undefined;

    afterEach(async () => {
      await server?.stop('SIGKILL');
      await scratch?.drop();
    });

    it('finishes every in-flight request, takes no new ones, closes the database and exits 0 on SIGTERM', { timeout: 60_000 }, async () => {
      scratch = await createScratchDatabase(kind);
      // Debug level: the log says when each request has reached the server and when the shutdown has begun.
      server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { LOG_LEVEL: 'debug' }));
      const { base } = server;
      const username = unique('owner');
      const account = { username, email: `${username}@example.com`, password: 'password123' };
      const registered = await request(base, 'POST', '/api/users', { body: { user: account } });
      expect(registered.status).toBe(201);

      const load = loadFor({ ...account, token: registered.body.user.token });
      const answers = Promise.all(load.map((item) => send(base, item)));
      // Every request has been read and routed before the signal: each is truly in flight.
      const log = server.output;
      await vi.waitFor(() => expect(load.filter((item) => !log().includes(`"reqId":"${item.id}"`))).toEqual([]), WATCH);

      const signalledAt = Date.now();
      const exited = server.stop('SIGTERM');
      await vi.waitFor(() => expect(log()).toContain('shutting down'), WATCH);
      const lateAnswers: Array<number | 'refused'> = [];
      do lateAnswers.push(await onNewConnection(base));
      while (server.child.exitCode === null && server.child.signalCode === null);

      const code = await exited;
      const exitedAfterMs = Date.now() - signalledAt;
      const results = await answers;

      expect(code, server.output()).toBe(0);
      expect(exitedAfterMs).toBeLessThan(EXIT_WITHIN_MS);
      expect(results.map((result) => result.status)).toEqual(load.map((item) => item.expected));
      // Some were still being worked on when the signal came: the drain was exercised, not just a quiet exit.
      expect(results.filter((result) => result.finishedAt > signalledAt).length).toBeGreaterThan(0);
      for (const answer of lateAnswers) expect([503, 'refused']).toContain(answer);

      const usernames = load.flatMap((item) => (item.username === undefined ? [] : [item.username]));
      if (kind === 'sqlite') {
        // A clean close checkpoints the write-ahead log into the database file and deletes it.
        const file = scratch.url.slice('sqlite:'.length);
        expect(existsSync(`${file}-wal`)).toBe(false);
      } else {
        expect(await connectionsTo(scratch.url)).toBe(0);
      }
      // Every registration that was answered 201 is stored.
      expect((await storedUsernames(scratch.url, usernames)).sort()).toEqual([...usernames].sort());
    });
  });
}
