import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { SETTING_NAMES } from '../../src/settings.js';
import { type Argon2Baseline, measureArgon2 } from './argon2-baseline.js';
import { startCeiling } from './ceiling.js';
import { BENCH_DIR, benchDatabaseOn, type DatabaseKind, locate, PROJECT_ROOT, prepareDatabase } from './databases.js';
import type { LoadResult } from './load.js';
import { type LockSampler, openLockSampler } from './locks.js';
import { type MeasureSettings, measureScenario } from './measure.js';
import { Progress } from './progress.js';
import { openTransactionCounter, startReplicaServers } from './replicas.js';
import { type DatabaseRun, describeMachine, formatRun, type ScenarioResult, writeResults } from './report.js';
import { articleTags, buildScenario, isExtraServers, logIn, pickTargets, SCENARIO_IDS, type ScenarioId } from './scenarios.js';
import { SCALES, type ScaleName } from './seed-data.js';
import { BENCH_OWNED_ENV, type RunningServer, type ServerOptions, shownEnv, startServer } from './server.js';

const DATABASE_KINDS = ['sqlite', 'postgres'] as const satisfies readonly DatabaseKind[];
const SCALE_NAMES = Object.keys(SCALES) as ScaleName[];
/** As many logins in flight in the argon2 baseline as the load generator keeps open by default. */
const ARGON2_IN_FLIGHT = 50;
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/** The mixed-replica scenario's servers: two, reading from the replica, the connections split between them. */
const REPLICA_SERVERS = 2;

const listOf =
  <T extends string>(allowed: readonly T[]) =>
  (raw: string): T[] => {
    const items = raw
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean);
    const unknown = items.filter((item) => !allowed.includes(item as T));
    if (items.length === 0 || unknown.length > 0) {
      throw new InvalidArgumentError(`expected a comma-separated list of ${allowed.join(', ')}`);
    }
    return [...new Set(items)] as T[];
  };

const positive =
  (integer: boolean) =>
  (raw: string): number => {
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
      throw new InvalidArgumentError(`expected a positive ${integer ? 'whole ' : ''}number`);
    }
    return value;
  };

/**
 * One --server-env KEY=VALUE, added to the ones before it. Any name is passed on (the server reads those of
 * src/settings.ts and ignores the rest), but not what the bench sets itself.
 */
function serverEnvEntry(raw: string, previous: Record<string, string>): Record<string, string> {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(raw);
  if (!match) throw new InvalidArgumentError('expected KEY=VALUE, e.g. SQLITE_SYNCHRONOUS=normal');
  const name = match[1]!;
  const value = match[2]!;
  if ((BENCH_OWNED_ENV as readonly string[]).includes(name)) {
    throw new InvalidArgumentError(`${name} is set by the bench`);
  }
  return { ...previous, [name]: value };
}

interface Options {
  scale: ScaleName[];
  db?: DatabaseKind[];
  postgresUrl?: string;
  replicaUrl?: string;
  redisUrl: string;
  scenarios: ScenarioId[];
  duration: number;
  warmup: number;
  connections: number;
  serverEnv: Record<string, string>;
  out?: string;
  reuse: boolean;
  cpuProf: boolean;
  smoke: boolean;
}

function parseOptions(): Options {
  const program = new Command('npm run bench --')
    .description(
      'Load-tests the real server (`node dist/server.js`, NODE_ENV=production) on seeded SQLite and PostgreSQL databases, ' +
        'next to a bare node:http "ceiling" server that answers the same requests with bodies of the same size.',
    )
    .addOption(
      new Option('--scale <list>', `data sizes to run, in order: ${SCALE_NAMES.join(', ')}`)
        .argParser(listOf(SCALE_NAMES))
        .default(SCALE_NAMES, SCALE_NAMES.join(',')),
    )
    .option('--db <list>', 'databases: sqlite, postgres (default: sqlite, plus postgres when a URL is given)', listOf(DATABASE_KINDS))
    .addOption(
      new Option(
        '--postgres-url <url>',
        "PostgreSQL server for the postgres runs; only its conduit_bench_<scale> databases are dropped and created, never the URL's own database",
      ).env('BENCH_DATABASE_URL'),
    )
    .addOption(
      new Option(
        '--replica-url <url>',
        "a streaming replica of the --postgres-url server, for mixed-replica; its database is swapped for the bench's as there",
      ).env('BENCH_REPLICA_URL'),
    )
    .addOption(
      new Option('--redis-url <url>', "Redis for mixed-replica's servers: where they keep each account's last write position")
        .env('BENCH_REDIS_URL')
        .default(DEFAULT_REDIS_URL),
    )
    .addOption(
      new Option('--scenarios <list>', `scenarios to run, in order: ${SCENARIO_IDS.join(', ')}`)
        .argParser(listOf(SCENARIO_IDS))
        .default([...SCENARIO_IDS], 'all'),
    )
    .option('--duration <seconds>', 'measured seconds per scenario (and per ceiling run)', positive(false), 10)
    .option(
      '--warmup <seconds>',
      'unmeasured seconds of the same load before each measurement, 0 for none',
      (raw) => (raw === '0' ? 0 : positive(false)(raw)),
      3,
    )
    .option('--connections <n>', 'concurrent connections of the load generator', positive(true), 50)
    .addOption(
      new Option(
        '--server-env <KEY=VALUE>',
        'an environment variable for every server the bench starts, e.g. SQLITE_SYNCHRONOUS=normal or DATABASE_POOL_SIZE=5; ' +
          `repeat for more. It replaces the bench's own value (see below); ${BENCH_OWNED_ENV.join(', ')} stay the bench's`,
      )
        .argParser(serverEnvEntry)
        .default({}, 'none'),
    )
    .option('--out <file>', 'results as JSON (default: .bench/results-<timestamp>.json)')
    .option(
      '--reuse',
      'keep seeded databases between runs: skip seeding when the same scale and seed version is there (new migrations still apply)',
    )
    .option('--cpu-prof', 'run the server with node --cpu-prof; profiles go to .bench/run-<timestamp>/profiles/')
    .option(
      '--smoke',
      'for CI: exit 1 if any response was non-2xx or any request failed or timed out; speed never fails. Leaves out the two-instance ' +
        'scenarios (*-2x) and mixed-replica unless --scenarios names them',
    )
    .addHelpText(
      'after',
      '\nThe server runs with NODE_ENV=production, LOG_LEVEL=info, RATE_LIMIT_MAX=0, WRITE_RATE_LIMIT_MAX=0,\n' +
        'AUTH_RATE_LIMIT_MAX=0 and AUTH_ADDRESS_RATE_LIMIT_MAX=0 unless --server-env says otherwise: all load comes\n' +
        'from one address and a few accounts, so the limits would otherwise answer most requests with 429. Every seeded account signs in with one\n' +
        'password. Server logs, CPU profiles and the seeded SQLite files are under .bench/.\n' +
        '\nThe two-instance scenarios (create-article-2x, favorite-2x) measure the write load on one server, then split\n' +
        'over two servers on the same database (the same connections in all, half to each), and report two / one. On\n' +
        "PostgreSQL they also read pg_stat_activity every 100 ms: the share of the database's active backends waiting on\n" +
        'a lock. Each server has its own pool of DATABASE_POOL_SIZE connections.\n' +
        '\nmixed-replica (PostgreSQL with --replica-url) measures the mixed reads beside 20 writes/s on one server on the\n' +
        'primary alone, then on two servers with DATABASE_REPLICA_URLS set to the replica and REDIS_URL to --redis-url\n' +
        "(a REDIS_KEY_PREFIX of the run's own), the connections split half to each, once both report the replica up; then\n" +
        "the same writes alone on those two. The primary's share of the read statements comes from pg_stat_database\n" +
        "(xact_commit of the bench database on each server, the writes-alone run's subtracted). A throwaway pair, as the\n" +
        'postgres OS user (the replica must allow as many connections as the primary):\n' +
        '  initdb -A trust -U postgres -D /tmp/pgrep-primary\n' +
        '  pg_ctl -D /tmp/pgrep-primary -o "-p 5441 -c listen_addresses=127.0.0.1 -c max_connections=200" -l /tmp/pgrep-primary.log start\n' +
        '  pg_basebackup -h 127.0.0.1 -p 5441 -U postgres -D /tmp/pgrep-replica -R -X stream\n' +
        '  pg_ctl -D /tmp/pgrep-replica -o "-p 5442 -c listen_addresses=127.0.0.1 -c max_connections=200" -l /tmp/pgrep-replica.log start\n' +
        'then --postgres-url postgres://postgres@127.0.0.1:5441/postgres --replica-url postgres://postgres@127.0.0.1:5442/postgres.',
    );
  const parsed = program.parse().opts<Omit<Options, 'reuse' | 'cpuProf' | 'smoke'> & Partial<Options>>();
  const smoke = parsed.smoke === true;
  let scenarios = parsed.scenarios;
  // The smoke run checks that every request succeeds; these scenarios send their base scenario's requests again, on more servers.
  if (smoke && program.getOptionValueSource('scenarios') === 'default') {
    scenarios = scenarios.filter((id) => !isExtraServers(id));
    console.log('smoke: the two-instance scenarios (*-2x) and mixed-replica are left out; name them in --scenarios to run them');
  }
  return { ...parsed, scenarios, reuse: parsed.reuse === true, cpuProf: parsed.cpuProf === true, smoke };
}

function build(): void {
  console.log('building dist/ (npm run build)');
  const result = spawnSync('npm', ['run', '--silent', 'build'], { cwd: PROJECT_ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error('npm run build failed');
}

/** Problems worth a line of their own: they make the run's figures describe something other than success. */
function warnings(result: ScenarioResult): string[] {
  const lines: string[] = [];
  const { non2xx, errors, timeouts, statusCodes } = result.server;
  if (non2xx > 0) {
    lines.push(`WARNING ${result.id}: ${non2xx} non-2xx responses (status counts ${JSON.stringify(statusCodes)})`);
    lines.push(
      result.failure
        ? `  for example ${result.failure.request} -> ${result.failure.status} ${result.failure.body}`
        : '  none of the requests failed when sent again on their own: the failures came with the load',
    );
  }
  if (errors > 0) {
    lines.push(
      `WARNING ${result.id}: ${errors} request errors, ${timeouts} of them timeouts (${JSON.stringify(result.server.errorCodes)})`,
    );
  }
  const replica = result.replica;
  const besideWrites: { where: string; reads?: LoadResult; writes: LoadResult }[] = [
    ...(result.mixed ?? []).map(({ writesAsked, reads, writes }) => ({ where: `beside ${writesAsked} writes/s`, reads, writes })),
    ...(replica === undefined
      ? []
      : [
          { where: 'on the primary alone', reads: replica.primaryAlone.reads, writes: replica.primaryAlone.writes },
          { where: 'reading from the replica', reads: replica.withReplica.reads, writes: replica.withReplica.writes },
          { where: 'with the writes alone', writes: replica.writesOnly },
        ]),
  ];
  for (const { where, reads, writes } of besideWrites) {
    for (const [what, load] of [
      ['reads', reads],
      ['writes', writes],
    ] as const) {
      if (load === undefined || load.non2xx + load.errors === 0) continue;
      lines.push(
        `WARNING ${result.id} ${where}: ${what} got ${load.non2xx} non-2xx (${JSON.stringify(load.statusCodes)}) and ${load.errors} errors`,
      );
    }
  }
  const alongside = result.login?.tagsAlongside;
  if (alongside && alongside.non2xx + alongside.errors > 0) {
    lines.push(`WARNING ${result.id}: GET /api/tags alongside got ${alongside.non2xx} non-2xx and ${alongside.errors} errors`);
  }
  return lines;
}

async function main(): Promise<number> {
  const options = parseOptions();
  const postgresUrl = options.postgresUrl;
  const databases = (options.db ?? (postgresUrl ? ['sqlite', 'postgres'] : ['sqlite'])).filter((kind) => {
    if (kind === 'postgres' && postgresUrl === undefined) {
      console.log('PostgreSQL skipped: give --postgres-url or set BENCH_DATABASE_URL to include it.');
      return false;
    }
    return true;
  });
  const stamp = new Date()
    .toISOString()
    .replace(/[:.]/g, '-')
    .replace(/-\d+Z$/, 'Z');
  const runDir = path.join(BENCH_DIR, `run-${stamp}`);
  const out = path.resolve(options.out ?? path.join(BENCH_DIR, `results-${stamp}.json`));
  mkdirSync(runDir, { recursive: true });

  for (const name of Object.keys(options.serverEnv)) {
    if (!(SETTING_NAMES as string[]).includes(name))
      console.log(`--server-env ${name}: not a server setting (src/settings.ts), passed on as is`);
  }
  const serverEnv = shownEnv(options.serverEnv);

  build();
  const machine = await describeMachine(postgresUrl);
  const settings: MeasureSettings = { connections: options.connections, warmupSeconds: options.warmup, seconds: options.duration };
  let argon2: Promise<Argon2Baseline> | undefined;
  const runs: DatabaseRun[] = [];
  const { replicaUrl, redisUrl } = options;
  // The URLs may carry a password: the results name only the servers.
  const shownOptions = {
    ...options,
    db: databases,
    postgresUrl: postgresUrl && new URL(postgresUrl).host,
    replicaUrl: replicaUrl && new URL(replicaUrl).host,
    redisUrl: new URL(redisUrl).host,
    serverEnv,
  };
  const save = () => writeResults(out, { startedAt: stamp, machine, options: shownOptions, runs });
  let requestsFailed = false;
  let runsStopped = false;

  const ceiling = await startCeiling();
  try {
    for (const scale of options.scale) {
      for (const kind of databases) {
        const database = locate(kind, scale, postgresUrl);
        const label = `${kind}/${scale}`;
        const progress = new Progress(label);
        const run: DatabaseRun = {
          database: kind,
          scale,
          seed: { reused: false, phases: progress.timings },
          serverLog: path.join(runDir, `server-${kind}-${scale}.log`),
          serverEnv,
          scenarios: [],
          rssMaxBytes: null,
        };
        runs.push(run);
        try {
          console.log(`\n${label}: ${options.reuse ? 'preparing (reuse allowed)' : 'seeding a fresh database'}`);
          run.seed.reused = (await prepareDatabase(database, options.reuse, progress)).reused;
          const targets = await pickTargets(database.config);
          const serverOptions = (suffix: string, logFile: string, env: Record<string, string> = {}): ServerOptions => ({
            databaseUrl: database.url,
            logFile,
            env: { ...options.serverEnv, ...env },
            ...(options.cpuProf && { cpuProfile: { dir: path.join(runDir, 'profiles'), name: `${kind}-${scale}${suffix}.cpuprofile` } }),
          });
          const server = await startServer(serverOptions('', run.serverLog));
          let second: Promise<RunningServer> | undefined;
          let replicaServers: Promise<RunningServer[]> | undefined;
          let locks: Promise<LockSampler> | undefined;
          try {
            const sessions = {
              few: await logIn(server.base, targets.sessionEmails),
              viewers: await logIn(server.base, targets.viewerEmails),
              articleTags: await articleTags(server.base, targets),
            };
            const context = {
              server,
              secondServer: () => {
                if (second === undefined) {
                  run.secondServerLog = path.join(runDir, `server-${kind}-${scale}-2.log`);
                  second = startServer(serverOptions('-2', run.secondServerLog));
                }
                return second;
              },
              ...(kind === 'postgres' && { lockSampler: () => (locks ??= openLockSampler(database.url)) }),
              ...(kind === 'postgres' &&
                postgresUrl !== undefined &&
                replicaUrl !== undefined && {
                  replica: {
                    servers: () => {
                      if (replicaServers === undefined) {
                        run.replicaServerLogs = Array.from({ length: REPLICA_SERVERS }, (_, k) =>
                          path.join(runDir, `server-${kind}-${scale}-replica-${k + 1}.log`),
                        );
                        const env = {
                          DATABASE_REPLICA_URLS: benchDatabaseOn(replicaUrl, scale),
                          REDIS_URL: redisUrl,
                          // Positions this run's servers keep, apart from any other's in the same Redis.
                          REDIS_KEY_PREFIX: `conduit-bench:${stamp}:${scale}:`,
                        };
                        replicaServers = startReplicaServers(
                          run.replicaServerLogs.map((logFile, k) => serverOptions(`-replica-${k + 1}`, logFile, env)),
                        );
                      }
                      return replicaServers;
                    },
                    transactions: openTransactionCounter(postgresUrl, replicaUrl, new URL(database.url).pathname.slice(1)),
                  },
                }),
              ceiling,
              settings,
              argon2: () => (argon2 ??= measureArgon2(options.duration, ARGON2_IN_FLIGHT)),
            };
            for (const id of options.scenarios) {
              if (id === 'mixed-replica' && context.replica === undefined) {
                console.log(
                  `${label} ${id}: skipped, ${kind === 'postgres' ? 'give --replica-url or set BENCH_REPLICA_URL' : 'PostgreSQL only'}`,
                );
                continue;
              }
              const result = await measureScenario(buildScenario(id, targets, sessions), context);
              run.scenarios.push(result);
              run.rssMaxBytes = Math.max(run.rssMaxBytes ?? 0, result.rssMaxBytes ?? 0) || null;
              const compared = result.instances
                ? `one server ${result.instances.one.load.requestsPerSecond.toFixed(0)} req/s (two / one ${result.instances.ratio.toFixed(2)})`
                : result.replica
                  ? `two servers reading from the replica; one on the primary alone ${result.replica.primaryAlone.reads.requestsPerSecond.toFixed(0)} ` +
                    `req/s (ratio ${result.replica.ratio.toFixed(2)}); ceiling ${result.ceiling?.requestsPerSecond.toFixed(0)} req/s`
                  : result.delivery
                    ? `delivery p99 ${result.delivery.stream.p99} ms to the streams, ${result.delivery.webhook.p99} ms to the webhook`
                    : `ceiling ${result.ceiling?.requestsPerSecond.toFixed(0)} req/s`;
              console.log(
                `${label} ${id}: ${result.server.requestsPerSecond.toFixed(0)} req/s, p99 ${result.server.latencyMs.p99} ms, ${compared}`,
              );
              const problems = warnings(result);
              for (const line of problems) console.log(line);
              if (problems.length > 0) requestsFailed = true;
            }
          } finally {
            // Set only if it started: a start that failed has been reported already.
            const started = await Promise.all([server, second?.catch(() => undefined), replicaServers?.catch(() => undefined)]);
            await Promise.all(started.flat().map((running) => running?.stop()));
            await locks?.then(
              (sampler) => sampler.close(),
              () => {},
            );
          }
        } catch (error) {
          run.error = error instanceof Error ? error.message : String(error);
          runsStopped = true;
        }
        console.log(`\n${formatRun(run)}`);
        save();
      }
    }
  } finally {
    await ceiling.stop();
  }
  console.log(`\nresults: ${out}`);
  if (options.cpuProf) console.log(`CPU profiles: ${path.join(runDir, 'profiles')} (open in Chrome DevTools or speedscope)`);
  if (requestsFailed)
    console.log(options.smoke ? 'SMOKE FAILED: see the warnings above.' : 'Some requests failed: see the warnings above.');
  if (runsStopped) console.log('Some runs stopped early: see RUN STOPPED EARLY above.');
  return runsStopped || (options.smoke && requestsFailed) ? 1 : 0;
}

process.exitCode = await main();
