import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { poolerSettings, TEST_SECRET } from './app.js';
import { freePort } from './ports.js';

export { freePort };

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The built program as users run it: `npm test` builds dist/ before vitest starts. */
export const CONDUIT_BIN = path.join(ROOT, 'bin', 'conduit.js');
export const SERVER_ENTRY = path.join(ROOT, 'dist', 'server.js');

const READY_TIMEOUT_MS = 30_000;

/** What a child process needs to run against `databaseUrl`, quietly and with the tests' secret. */
export function childEnv(databaseUrl: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    JWT_SECRET: TEST_SECRET,
    DATA_DIR: mkdtempSync(path.join(tmpdir(), 'conduit-child-')),
    DATABASE_URL: databaseUrl,
    ...poolerSettings(databaseUrl),
    ...extra,
  };
}

/** For load from one test: a single client address sending far more than the per-address limits allow a real one. */
export const NO_RATE_LIMITS = { RATE_LIMIT_MAX: '0', WRITE_RATE_LIMIT_MAX: '0', AUTH_ADDRESS_RATE_LIMIT_MAX: '0' };

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <script> ...args` to completion. */
export function runNode(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export const runConduit = (args: string[], env: NodeJS.ProcessEnv) => runNode(CONDUIT_BIN, args, env);

/** A server started as a child process, with everything it printed so far for failure messages. */
export interface RunningServer {
  base: string;
  child: ChildProcess;
  output: () => string;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startServer(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<RunningServer> {
  const port = await freePort();
  const child = spawn(process.execPath, [script, ...args], {
    // Loopback unless a test chooses another HOST; `base` reaches either way.
    env: { HOST: '127.0.0.1', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const server: RunningServer = {
    base: `http://127.0.0.1:${port}`,
    child,
    output: () => output,
    stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode} before answering:\n${output}`);
    try {
      if ((await fetch(`${server.base}/api/tags`)).ok) return server;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await server.stop('SIGKILL');
      throw new Error(`server did not answer within ${READY_TIMEOUT_MS} ms:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One JSON request over HTTP; the parsed body, or undefined when empty. */
export async function request(
  base: string,
  method: string,
  url: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Token ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${url}`, {
    method,
    headers,
    ...(options.body !== undefined && { body: JSON.stringify(options.body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text === '' ? undefined : JSON.parse(text) };
}
