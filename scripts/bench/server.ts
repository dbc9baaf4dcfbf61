import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type SettingName, settingSchemas } from '../../src/settings.js';
import { freePort } from '../../test/support/ports.js';
import { PROJECT_ROOT } from './databases.js';

const READY_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 30_000;
const RSS_SAMPLE_MS = 200;

export interface ServerOptions {
  databaseUrl: string;
  /** The server's stdout and stderr: the terminal is the bench's. */
  logFile: string;
  /** Runs the server under --cpu-prof, writing `<name>` into `dir` when it exits. */
  cpuProfile?: { dir: string; name: string };
  /** Environment variables given with --server-env: they replace the bench's defaults (rate limits, log level). */
  env?: Record<string, string>;
}

/** What the bench itself sets for where the server listens and what it serves; --server-env may not change them. */
export const BENCH_OWNED_ENV = ['HOST', 'PORT', 'DATABASE_URL', 'DATA_DIR'] as const;

/** One per bench run: every server it starts accepts the tokens the others issued, as instances behind one balancer must. */
const JWT_SECRET = randomBytes(36).toString('base64url');

/** The --server-env values as the results show them: a setting that may hold a password (`writeOnly`) is hidden. */
export function shownEnv(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).map(([name, value]) => [name, settingSchemas[name as SettingName]?.writeOnly ? '(hidden)' : value]),
  );
}

export interface RunningServer {
  base: string;
  pid: number;
  /** SIGTERM, then waits for the exit (a CPU profile is written during it). */
  stop(): Promise<void>;
}

const logTail = (file: string) => readFileSync(file, 'utf8').split('\n').slice(-20).join('\n');

/**
 * The node arguments of package.json's `start` script, so that the bench measures the server exactly as
 * `npm start` runs it (its V8 flags included) without npm's own process in between. The script's paths are
 * the project's; the server runs elsewhere.
 */
function startScriptArguments(): string[] {
  const packageJson = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const [command, ...args] = packageJson.scripts.start.trim().split(/\s+/);
  if (command !== 'node') throw new Error(`package.json's start script should run node; it is "${packageJson.scripts.start}"`);
  return args.map((arg) => (arg.startsWith('-') ? arg : path.resolve(PROJECT_ROOT, arg)));
}

/** What `npm start` runs once built, with production settings. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const port = await freePort();
  const profiling = options.cpuProfile
    ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfile.dir}`, `--cpu-prof-name=${options.cpuProfile.name}`]
    : [];
  mkdirSync(path.dirname(options.logFile), { recursive: true });
  const log = openSync(options.logFile, 'a');
  const child = spawn(process.execPath, [...profiling, ...startScriptArguments()], {
    // A folder of its own: the server reads .env from its working directory, and a developer's .env must not
    // change what is measured.
    cwd: path.dirname(options.logFile),
    env: {
      PATH: process.env.PATH,
      // The argon2 baseline inherits the bench's environment: both must get the same libuv thread pool.
      ...(process.env.UV_THREADPOOL_SIZE && { UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE }),
      NODE_ENV: 'production',
      JWT_SECRET,
      // Every request comes from this one address, and a few accounts write hundreds of times a second: the limits
      // would turn the load into 429s.
      RATE_LIMIT_MAX: '0',
      WRITE_RATE_LIMIT_MAX: '0',
      AUTH_RATE_LIMIT_MAX: '0',
      AUTH_ADDRESS_RATE_LIMIT_MAX: '0',
      // The events scenario's 50 live streams come from this one address, its webhook receiver listens on loopback.
      EVENT_STREAMS_PER_CLIENT: '0',
      // So do the search scenarios' 16 clients: one client could have only two searches at once.
      SEARCHES_PER_CLIENT: '0',
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      LOG_LEVEL: 'info',
      ...options.env,
      ...({
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: options.databaseUrl,
        DATA_DIR: path.join(path.dirname(options.logFile), 'data'),
      } satisfies Record<(typeof BENCH_OWNED_ENV)[number], string>),
    },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const base = `http://127.0.0.1:${port}`;

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `the server exited (${child.exitCode ?? child.signalCode}) before it was ready; ${options.logFile} ends:\n${logTail(options.logFile)}`,
      );
    }
    const ready = await fetch(`${base}/health/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `the server was not ready within ${READY_TIMEOUT_MS / 1000} s; ${options.logFile} ends:\n${logTail(options.logFile)}`,
      );
    }
    await sleep(100);
  }

  return {
    base,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The process and every process below it (the workers of a server run with WORKERS=2, which forks them after it
 * starts), from /proc; a process that is gone, or a system without /proc, adds none.
 */
function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    try {
      for (const task of readdirSync(`/proc/${tree[i]}/task`)) {
        const children = readFileSync(`/proc/${tree[i]}/task/${task}/children`, 'utf8').trim();
        if (children !== '') tree.push(...children.split(' ').map(Number));
      }
    } catch {
      // Exited meanwhile: its own figures below come out null too.
    }
  }
  return tree;
}

/** Resident memory in bytes from /proc; `null` where there is no /proc (not Linux) or the process is gone. */
function residentBytes(pid: number): number | null {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** The kernel's unit for process CPU times in /proc; `getconf` asks once, since Node cannot call sysconf. */
let clockTicksPerSecond: number | undefined;

/** CPU seconds one process has used so far, every thread; `null` where there is no /proc or the process is gone. */
function processCpuSeconds(pid: number): number | null {
  try {
    // The command name (field 2) is in parentheses and may hold spaces; the fields after it are fixed.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    clockTicksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / clockTicksPerSecond;
  } catch {
    return null;
  }
}

/**
 * CPU seconds the servers have used so far (user and system, every thread: the event loop, the GC, the thread
 * pool; and their cluster workers) from /proc; `null` where there is no /proc or a server is gone.
 */
export function cpuSeconds(pids: readonly number[]): number | null {
  let total = 0;
  for (const root of pids) {
    const [own, ...below] = processTree(root).map(processCpuSeconds);
    if (own === null || own === undefined) return null;
    // A worker that exits between the listing and the read adds nothing.
    total += own + below.reduce<number>((sum, seconds) => sum + (seconds ?? 0), 0);
  }
  return total;
}

/**
 * Samples the servers' RSS until stopped; stop() gives the highest sample of any one process (a server, or one of
 * its cluster workers) in bytes, `null` if none could be read.
 */
export function watchRss(pids: readonly number[]): { stop(): number | null } {
  let highest: number | null = null;
  const sample = () => {
    for (const pid of pids.flatMap(processTree)) {
      const bytes = residentBytes(pid);
      if (bytes !== null) highest = Math.max(highest ?? 0, bytes);
    }
  };
  sample();
  const timer = setInterval(sample, RSS_SAMPLE_MS);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return highest;
    },
  };
}
