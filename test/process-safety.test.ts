import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { listeningText } from '../src/cli/serve.js';
import { createScratchDatabase, type ScratchDatabase } from './support/app.js';
import { unique } from './support/client.js';
import { childEnv, type RunningServer, request, SERVER_ENTRY, startServer } from './support/processes.js';

const CRASH_PRELOAD = { NODE_OPTIONS: `--import=${pathToFileURL(path.join(import.meta.dirname, 'support', 'crash-on-signal.mjs')).href}` };
const WATCH = { timeout: 10_000, interval: 5 };

const logLines = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));

describe('the listening line', () => {
  it('names the URL, the API and the docs', () => {
    expect(listeningText('http://127.0.0.1:3000')).toBe(
      'Conduit listening on http://127.0.0.1:3000 — API http://127.0.0.1:3000/api, docs http://127.0.0.1:3000/docs',
    );
    expect(listeningText('http://[::1]:8080')).toBe(
      'Conduit listening on http://[::1]:8080 — API http://[::1]:8080/api, docs http://[::1]:8080/docs',
    );
  });

  it('adds an address a browser can reach when listening on every IPv6 address', () => {
    expect(listeningText('http://[::]:3000')).toBe(
      'Conduit listening on http://[::]:3000 (http://localhost:3000) — API http://localhost:3000/api, docs http://localhost:3000/docs',
    );
  });
});

describe('node dist/server.js', () => {
  let scratch: ScratchDatabase | undefined;
  let server: RunningServer | undefined;

  afterEach(async () => {
    await server?.stop('SIGKILL');
    await scratch?.drop();
  });

  it('logs the listening line once, at info', async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { LOG_LEVEL: 'info' }));
    const { base } = server;
    const listening = logLines(server.output()).filter((line) => String(line.msg).startsWith('Conduit listening'));
    expect(listening).toEqual([
      expect.objectContaining({ level: 30, msg: `Conduit listening on ${base} — API ${base}/api, docs ${base}/docs` }),
    ]);
  });

  it('names a loopback URL among the addresses when listening on 0.0.0.0', async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { LOG_LEVEL: 'info', HOST: '0.0.0.0' }));
    const { base } = server;
    const listening = logLines(server.output())
      .map((line) => String(line.msg))
      .filter((msg) => msg.startsWith('Conduit listening'));
    expect(listening).toContain(`Conduit listening on ${base} — API ${base}/api, docs ${base}/docs`);
    expect(listening.filter((msg) => msg.includes('0.0.0.0'))).toEqual([]);
  });

  for (const [crashAs, message, origin] of [
    ['exception', 'boom from a timer', 'uncaughtException'],
    ['rejection', 'boom from a promise', 'unhandledRejection'],
  ] as const) {
    it(`after an uncaught ${crashAs}: logs it at fatal with its stack, finishes the request in flight, closes the database and exits 1`, {
      timeout: 60_000,
    }, async () => {
      scratch = await createScratchDatabase('sqlite');
      server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { LOG_LEVEL: 'debug', CRASH_AS: crashAs, ...CRASH_PRELOAD }));
      const { base, child, output } = server;
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const username = unique('crash');
      const user = { email: `${username}@example.com`, password: 'password123' };
      expect((await request(base, 'POST', '/api/users', { body: { user: { username, ...user } } })).status).toBe(201);

      // A login whose body is half sent: the server has taken it on and waits for the rest while the error strikes.
      const body = JSON.stringify({ user });
      const { hostname, port } = new URL(base);
      const login = http.request({
        hostname,
        port,
        method: 'POST',
        path: '/api/users/login',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': 'in-flight' },
      });
      const answered = new Promise<{ status: number | undefined; text: string }>((resolve, reject) => {
        login.on('response', (response) => {
          let text = '';
          response.on('data', (chunk) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode, text }));
        });
        login.on('error', reject);
      });
      login.write(body.slice(0, 10));
      await vi.waitFor(() => expect(output()).toContain('"reqId":"in-flight"'), WATCH);

      child.kill('SIGUSR2');
      await vi.waitFor(() => expect(logLines(output()).some((line) => line.level === 60)).toBe(true), WATCH);
      login.end(body.slice(10));

      const answer = await answered;
      expect(answer.status, output()).toBe(200);
      expect(JSON.parse(answer.text).user.email).toBe(user.email);
      expect(await exited, output()).toBe(1);

      const fatal = logLines(output()).filter((line) => line.level === 60);
      expect(fatal).toHaveLength(1);
      expect(fatal[0]).toMatchObject({ origin, err: { type: 'Error', message } });
      expect(fatal[0].err.stack).toMatch(new RegExp(`^Error: ${message}\\n\\s+at .*crash-on-signal\\.mjs`));
      // A clean close checkpoints SQLite's write-ahead log into the database file and deletes it.
      expect(existsSync(`${scratch.url.slice('sqlite:'.length)}-wal`)).toBe(false);
    });
  }

  it('prints the error and exits 1 when one strikes while starting, before the logger exists', { timeout: 30_000 }, async () => {
    // A database that takes connections and never answers holds the start in its first query, long enough to strike.
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as net.AddressInfo;
    try {
      const env = childEnv(`postgres://conduit@127.0.0.1:${port}/conduit`, { HOST: '127.0.0.1', PORT: '0', ...CRASH_PRELOAD });
      const child = spawn(process.execPath, [SERVER_ENTRY], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk) => (output += chunk));
      child.stderr.on('data', (chunk) => (output += chunk));
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      await vi.waitFor(() => expect(sockets.length).toBeGreaterThan(0), WATCH);
      child.kill('SIGUSR2');
      expect(await exited, output).toBe(1);
      expect(output).toMatch(/^conduit: uncaughtException while starting: Error: boom from a timer\n\s+at .*crash-on-signal\.mjs/m);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
