import cluster, { type Worker } from 'node:cluster';
import { setFlagsFromString } from 'node:v8';
import type { FastifyInstance } from 'fastify';
import { type BuildOptions, buildApp } from '../app.js';
import type { Config } from '../config.js';
import { openDatabase } from '../db/index.js';
import { migrateOnStart } from '../db/migrate.js';
import { keepPlacesForWorkers } from '../plugins/held-places.js';
import { keepCountersForWorkers } from '../plugins/limit-counters.js';
import { DOCS_PATH } from '../plugins/openapi.js';

const SHUTDOWN_GRACE_MS = 10_000;
const RESTART_DELAY_MS = 250;
const MAX_RESTART_DELAY_MS = 30_000;
/** A worker that ran this long before crashing was healthy; its replacement starts without delay growth. */
const STABLE_UPTIME_MS = 60_000;

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * How far V8 lets the old generation grow past what survived the last full collection before it collects
 * again: 50 % here. Where memory is plentiful V8 allows up to 300 %, and under a write load, requests queued
 * behind the database outlive the young generation, so the heap filled up to about four times the live data
 * (RSS 185-210 MB on the small benchmark, 128 MB with this; docs/PERFORMANCE.md). V8 reads the setting at
 * every full collection, so setting it here covers every way of starting the server; NODE_OPTIONS refuses it.
 */
const HEAP_GROWING_PERCENT = 50;

/**
 * Fastify's line for each address it listens on, with where a browser finds the API and its docs. For 0.0.0.0 Fastify
 * passes each interface's address, loopback included; for `::` only `[::]`, which a browser cannot connect to.
 */
export function listeningText(address: string): string {
  const reachable = new URL(address);
  const anyAddress = reachable.hostname === '[::]';
  if (anyAddress) reachable.hostname = 'localhost';
  const base = reachable.origin;
  return `Conduit listening on ${anyAddress ? `${address} (${base})` : base} — API ${base}/api, docs ${base}${DOCS_PATH}`;
}

/**
 * One server in this process: listens, and on SIGTERM/SIGINT, or an error nothing caught, stops taking connections,
 * finishes in-flight requests, closes the database and exits (1 after an uncaught error).
 */
async function startServer(config: Config, options: BuildOptions = {}): Promise<void> {
  let app: FastifyInstance | undefined;
  let closing = false;
  let crashed = false;
  const drainAndExit = (server: FastifyInstance) => {
    if (closing) return;
    closing = true;
    const timer = setTimeout(() => {
      server.log.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS);
    timer.unref();
    server.close().then(
      () => process.exit(crashed ? 1 : 0),
      (error: unknown) => {
        server.log.error({ err: error }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  for (const signal of SIGNALS) {
    process.on(signal, () => {
      // Stopped while starting (a rolling restart, a supervisor giving up): nothing can be in flight yet.
      if (app === undefined) process.exit(0);
      if (!closing) app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      drainAndExit(app);
    });
  }
  // An unhandled rejection arrives here too (origin "unhandledRejection"), as Node raises it by default. Whatever
  // threw may have left shared state broken, so the process goes; the requests already running may still finish.
  process.on('uncaughtException', (error, origin) => {
    crashed = true;
    if (app === undefined) {
      console.error(`conduit: ${origin} while starting:`, error);
      process.exit(1);
    }
    app.log.fatal({ err: error, origin }, `${origin} outside any request; shutting down: finishing in-flight requests`);
    drainAndExit(app);
  });

  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  app = await buildApp(config, options);
  await app.listen({ host: config.host, port: config.port, listenTextResolver: listeningText });
}

const say = (message: string) => console.error(`conduit[primary ${process.pid}]: ${message}`);

/**
 * The cluster primary serves nothing itself: it keeps `count` workers alive on the shared port, replacing a
 * crashed one after a delay that doubles with each crash in a row (a worker that dies at start must not spin),
 * and on SIGTERM/SIGINT passes the signal on and exits once every worker has finished its requests. It
 * migrates once before forking, so workers never contend for the migration lock at start, and keeps the limits'
 * counters for all of them.
 */
async function superviseWorkers(config: Config, count: number): Promise<void> {
  const startedAt = new Map<Worker, number>();
  let crashesInARow = 0;
  let stopping = false;
  let stopSignal: NodeJS.Signals | undefined;
  let failedExit = false;

  const fork = () => startedAt.set(cluster.fork(), Date.now());
  const running = () => Object.values(cluster.workers ?? {}).filter((worker) => worker !== undefined);
  const exitWhenDone = () => {
    if (running().length === 0) process.exit(failedExit ? 1 : 0);
  };

  cluster.on('exit', (worker, code, signal) => {
    const uptime = Date.now() - (startedAt.get(worker) ?? 0);
    startedAt.delete(worker);
    const crashed = code !== 0 || signal !== null;
    if (stopping) {
      // Killed by the very signal passed on means it was stopped before it could install its handler.
      if (crashed && signal !== stopSignal) {
        failedExit = true;
        say(`worker ${worker.process.pid} did not stop cleanly (${signal ?? `exit code ${code}`})`);
      }
      exitWhenDone();
      return;
    }
    // A clean exit means someone stopped that worker on purpose; only crashes are replaced.
    if (!crashed) {
      say(`worker ${worker.process.pid} stopped`);
      exitWhenDone();
      return;
    }
    crashesInARow = uptime >= STABLE_UPTIME_MS ? 0 : crashesInARow + 1;
    const delay = Math.min(MAX_RESTART_DELAY_MS, RESTART_DELAY_MS * 2 ** Math.max(0, crashesInARow - 1));
    say(`worker ${worker.process.pid} died (${signal ?? `exit code ${code}`}); starting another in ${delay} ms`);
    setTimeout(() => {
      if (!stopping) fork();
    }, delay);
  });

  for (const signal of SIGNALS) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      stopSignal = signal;
      say(`${signal}: stopping ${running().length} worker(s)`);
      for (const worker of running()) worker.process.kill(signal);
      exitWhenDone();
    });
  }

  // Signals are handled from here on: one during the migration stops cleanly, and no worker starts.
  const database = openDatabase(config.database);
  try {
    await migrateOnStart(config.database, database);
  } finally {
    await database.destroy();
  }
  keepCountersForWorkers();
  keepPlacesForWorkers();
  for (let i = 0; i < count; i++) fork();
  say(`started ${count} workers`);
}

/** `conduit serve`: one server in this process, or a cluster of `workers` processes sharing the port. */
export async function serve(config: Config, workers: number): Promise<void> {
  if (cluster.isWorker) return startServer(config, { migrate: false, countInPrimary: true });
  if (workers === 1) return startServer(config);
  return superviseWorkers(config, workers);
}
