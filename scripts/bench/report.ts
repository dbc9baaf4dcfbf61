import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { Argon2Baseline } from './argon2-baseline.js';
import type { DatabaseKind } from './databases.js';
import type { DeliveryResult } from './delivery.js';
import type { Answer, LoadResult } from './load.js';
import type { LockWaits } from './locks.js';
import type { PhaseTiming } from './progress.js';
import type { OnEach, TransactionCounts } from './replicas.js';
import type { ScenarioId } from './scenarios.js';
import type { ScaleName } from './seed-data.js';

export interface ScenarioResult {
  id: ScenarioId;
  title: string;
  /** Median body size of the scenario's answers, the size the ceiling answers with. */
  responseBytes: number;
  /** For the two-instance scenarios, the load on both servers. */
  server: LoadResult;
  /** `null` for the two-instance scenarios: they send their base scenario's requests, whose ceiling that one measures. */
  ceiling: LoadResult | null;
  /** server req/s / ceiling req/s. */
  ratio: number | null;
  rssMaxBytes: number | null;
  /** Server CPU (all its threads) per answered request over the measured seconds, in µs; `null` without /proc. */
  cpuMicrosPerRequest: number | null;
  /** A non-2xx answer to one of the scenario's requests, sent on its own, to show what went wrong. */
  failure?: Pick<Answer, 'status' | 'body'> & { request: string };
  /** Only for `mixed`: the same reads beside steady writes; `server` above is the reads alone. */
  mixed?: MixedResult[];
  /** Only for `login`: how close it gets to bare argon2, and whether other requests stay fast meanwhile. */
  login?: { argon2: Argon2Baseline; ratio: number; tagsAlongside: LoadResult };
  /** Only for `events`: how long events took from their write to the live streams and the webhook receiver. */
  delivery?: DeliveryResult;
  /** Only for the two-instance scenarios: the same load on one server, then on two; `ratio` is two's req/s over one's. */
  instances?: { one: InstancesRun; two: InstancesRun; ratio: number };
  /** Only for `mixed-replica`; `server` above is the reads on the two servers reading from the replica. */
  replica?: ReplicaResult;
}

/** The mixed reads beside writes on one server on the primary alone, then on two servers reading from a replica. */
export interface ReplicaResult {
  writesAsked: number;
  primaryAlone: ReplicaRun;
  withReplica: ReplicaRun;
  /** withReplica's reads/s over primaryAlone's. */
  ratio: number;
  /** The same writes on the same two servers, alone and for as long: what the servers run besides the reads. */
  writesOnly: LoadResult;
  readShare: ReadShare;
}

/** One measured load of mixed-replica: reads from `connections` clients, writes paced alongside. */
export interface ReplicaRun {
  servers: number;
  reads: LoadResult;
  writes: LoadResult;
  /** Server CPU per answered request (reads and writes), every server's summed. */
  cpuMicrosPerRequest: number | null;
}

/**
 * Where the read statements of withReplica ran, from the bench database's committed transactions on each server,
 * counted over its warm-up and measured seconds (the writes run beside both), and over as long of the writes alone.
 */
export interface ReadShare {
  source: 'pg_stat_database.xact_commit';
  mixed: TransactionCounts;
  writesOnly: TransactionCounts;
  /** mixed less writesOnly, on each server: the read statements. */
  reads: OnEach;
  /** The most replica polls each of `reads` may still hold (replicas.ts unsubtractedPolls). */
  pollsUnsubtracted: number;
  /** reads.primary / (reads.primary + reads.replica); null when no reads were counted. */
  primaryShare: number | null;
  /** Read statements per read request answered (the warm-up's too): a check that the counts are the reads'. */
  statementsPerRead: number | null;
}

/** One measured load of a two-instance scenario. */
export interface InstancesRun {
  servers: number;
  load: LoadResult;
  /** Server CPU per answered request, every server's summed. */
  cpuMicrosPerRequest: number | null;
  /** `null` on SQLite: pg_stat_activity is PostgreSQL's. */
  lockWaits: LockWaits | null;
}

/** Reads measured beside writes asked at `writesAsked` per second; `ratio` is their req/s over the reads' alone. */
export interface MixedResult {
  writesAsked: number;
  reads: LoadResult;
  writes: LoadResult;
  ratio: number;
}

export interface DatabaseRun {
  database: DatabaseKind;
  scale: ScaleName;
  seed: { reused: boolean; phases: PhaseTiming[] };
  serverLog: string;
  /** The second server of the two-instance scenarios, when one ran. */
  secondServerLog?: string;
  /** The two servers of mixed-replica, reading from the replica, when they ran. */
  replicaServerLogs?: string[];
  /** What --server-env gave every server, writeOnly settings hidden. */
  serverEnv: Record<string, string>;
  scenarios: ScenarioResult[];
  rssMaxBytes: number | null;
  /** Set when the run stopped early (the server did not start, a setup request failed). */
  error?: string;
}

export interface Machine {
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  os: string;
  node: string;
  sqlite: string;
  postgres: string | null;
}

/** The target for GET /api/tags' p99 while logins saturate the thread pool: the event loop must stay free. */
export const TAGS_P99_TARGET_MS = 25;
/** From an event's write to its arrival at a live stream or a webhook receiver, at 20 writes/s with 50 streams open. */
export const DELIVERY_P99_TARGET_MS = 1000;
/** The targets for the write scenarios on two servers sharing one PostgreSQL database. */
export const TWO_INSTANCE_RATIO_TARGET = 0.9;
export const LOCK_WAIT_TARGET = 0.1;
/** The targets of mixed-replica: two servers on a replica against one on the primary, beside 20 writes/s. */
export const REPLICA_READS_RATIO_TARGET = 0.9;
export const REPLICA_WRITE_P99_TARGET_MS = 50;
export const PRIMARY_READ_SHARE_TARGET = 0.1;

export async function describeMachine(postgresUrl: string | undefined): Promise<Machine> {
  const memory = new BetterSqlite3(':memory:');
  const { version: sqlite } = memory.prepare('select sqlite_version() as version').get() as { version: string };
  memory.close();
  let postgres: string | null = null;
  if (postgresUrl !== undefined) {
    const client = new pg.Client({ connectionString: postgresUrl });
    await client.connect();
    try {
      postgres = (await client.query<{ version: string }>('select version()')).rows[0]?.version ?? null;
    } finally {
      await client.end();
    }
  }
  return {
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryBytes: os.totalmem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    sqlite,
    postgres,
  };
}

const megabytes = (bytes: number | null) => (bytes === null ? '-' : (bytes / 1_048_576).toFixed(0));
const decimals = (value: number, digits: number) =>
  value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

const percent = (fraction: number) => `${decimals(fraction * 100, 1)} %`;
/** The waits shown beside the lock share: the commonest, as shares of every active backend seen. */
const SHOWN_WAITS = 4;

function describeInstancesRun({ servers, load, cpuMicrosPerRequest, lockWaits }: InstancesRun): string {
  const figures =
    `${servers === 1 ? 'one server' : `${servers} servers`}: ${decimals(load.requestsPerSecond, 0)} req/s, ` +
    `p50 ${decimals(load.latencyMs.p50, 1)} ms, p99 ${decimals(load.latencyMs.p99, 1)} ms, ` +
    `CPU ${cpuMicrosPerRequest === null ? '-' : decimals(cpuMicrosPerRequest, 0)} µs/req`;
  if (lockWaits === null) return `${figures}; no lock sampling (pg_stat_activity is PostgreSQL's)`;
  const { lockFraction, activeMean, idleInTransactionMean, samples, waits } = lockWaits;
  const seen = Object.values(waits).reduce((sum, n) => sum + n, 0);
  const commonest = Object.entries(waits)
    .sort(([, a], [, b]) => b - a)
    .slice(0, SHOWN_WAITS)
    .map(([wait, n]) => `${wait} ${percent(n / seen)}`);
  return (
    `${figures}; lock waits ${lockFraction === null ? '-' : percent(lockFraction)} of active backends ` +
    `(on average over ${samples} samples ${decimals(activeMean, 1)} active, ${decimals(idleInTransactionMean, 1)} idle in a ` +
    `transaction; active by wait: ${commonest.join(', ') || 'none'})`
  );
}

const metOrMissed = (met: boolean) => (met ? 'met' : 'MISSED');

function describeReplica({ writesAsked, primaryAlone, withReplica, ratio, writesOnly, readShare }: ReplicaResult): string[] {
  const run = (name: string, { servers, reads, writes, cpuMicrosPerRequest }: ReplicaRun) => {
    const p99 = writes.latencyMs.p99;
    return (
      `mixed-replica, ${name} (${servers === 1 ? 'one server' : `${servers} servers`}): reads ${decimals(reads.requestsPerSecond, 0)} req/s, ` +
      `p99 ${decimals(reads.latencyMs.p99, 1)} ms; writes ${decimals(writes.requestsPerSecond, 1)}/s of ${writesAsked} asked, ` +
      `p99 ${decimals(p99, 1)} ms (target < ${REPLICA_WRITE_P99_TARGET_MS} ms: ${metOrMissed(p99 < REPLICA_WRITE_P99_TARGET_MS)}); ` +
      `CPU ${cpuMicrosPerRequest === null ? '-' : decimals(cpuMicrosPerRequest, 0)} µs/req`
    );
  };
  const { primaryShare, reads, mixed, statementsPerRead, pollsUnsubtracted } = readShare;
  const only = readShare.writesOnly;
  return [
    run('primary alone', primaryAlone),
    run('reading from the replica', withReplica),
    `mixed-replica: reads with the replica / primary alone ${decimals(ratio, 2)} ` +
      `(target >= ${REPLICA_READS_RATIO_TARGET}: ${metOrMissed(ratio >= REPLICA_READS_RATIO_TARGET)}); primary's share of the read statements ` +
      (primaryShare === null
        ? '- (no reads counted)'
        : `${percent(primaryShare)} (target < ${percent(PRIMARY_READ_SHARE_TARGET)}: ${metOrMissed(primaryShare < PRIMARY_READ_SHARE_TARGET)})`),
    `mixed-replica: by ${readShare.source}, primary ${mixed.primary} - ${only.primary} writes alone = ${reads.primary}, ` +
      `replica ${mixed.replica} - ${only.replica} = ${reads.replica} (each may hold up to ${pollsUnsubtracted} of the servers' replica ` +
      `polls, published late); ${statementsPerRead === null ? '-' : decimals(statementsPerRead, 2)} ` +
      `statements per read; writes alone ${decimals(writesOnly.requestsPerSecond, 1)}/s, p99 ${decimals(writesOnly.latencyMs.p99, 1)} ms`,
  ];
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  // The first column is a name, the others are numbers: right-aligned so that digits line up.
  const line = (cells: string[]) =>
    cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

export function formatRun(run: DatabaseRun): string {
  const seeded = run.seed.reused
    ? 'reused'
    : `seeded in ${decimals(
        run.seed.phases.reduce((sum, phase) => sum + phase.seconds, 0),
        1,
      )} s`;
  const rows = run.scenarios.map((result) => [
    result.id,
    decimals(result.server.requestsPerSecond, 0),
    decimals(result.server.latencyMs.p50, 1),
    decimals(result.server.latencyMs.p99, 1),
    String(result.server.non2xx),
    `${result.server.errors} (${result.server.timeouts})`,
    result.ceiling === null ? '-' : decimals(result.ceiling.requestsPerSecond, 0),
    result.ratio === null ? '-' : decimals(result.ratio, 3),
    megabytes(result.rssMaxBytes),
    result.cpuMicrosPerRequest === null ? '-' : decimals(result.cpuMicrosPerRequest, 0),
  ]);
  const env = Object.entries(run.serverEnv).map(([name, value]) => `${name}=${value}`);
  const lines = [
    `== ${run.database} / ${run.scale}${env.length > 0 ? `, server env ${env.join(' ')}` : ''} (${seeded}) ==`,
    table(
      ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors (timeouts)', 'ceiling req/s', 'ratio', 'RSS MB', 'CPU µs/req'],
      rows,
    ),
  ];
  for (const result of run.scenarios) {
    if (result.login === undefined) continue;
    const { argon2, ratio, tagsAlongside } = result.login;
    const p99 = tagsAlongside.latencyMs.p99;
    lines.push(
      `login: bare argon2id ${decimals(argon2.verifiesPerSecond, 1)} verifies/s (${argon2.inFlight} in flight), ` +
        `login ratio ${decimals(ratio, 3)}; GET /api/tags alongside: p99 ${decimals(p99, 1)} ms ` +
        `(target < ${TAGS_P99_TARGET_MS} ms: ${p99 < TAGS_P99_TARGET_MS ? 'met' : 'MISSED'})`,
    );
  }
  for (const result of run.scenarios) {
    for (const { writesAsked, reads, writes, ratio } of result.mixed ?? []) {
      lines.push(
        `mixed beside ${writesAsked} writes/s: reads ${decimals(reads.requestsPerSecond, 0)} req/s ` +
          `(${decimals(ratio, 2)} x alone, ${decimals(result.server.requestsPerSecond, 0)} req/s); writes ` +
          `${decimals(writes.requestsPerSecond, 1)}/s achieved, p50 ${decimals(writes.latencyMs.p50, 1)} ms, ` +
          `p99 ${decimals(writes.latencyMs.p99, 1)} ms`,
      );
    }
  }
  for (const result of run.scenarios) {
    if (result.instances === undefined) continue;
    const { one, two, ratio } = result.instances;
    for (const measured of [one, two]) lines.push(`${result.id} on ${describeInstancesRun(measured)}`);
    const locked = two.lockWaits?.lockFraction;
    // The targets are PostgreSQL's: SQLite has one writer for the file, however many processes.
    const verdict = (met: boolean) => (run.database === 'postgres' ? `: ${met ? 'met' : 'MISSED'}` : ' on PostgreSQL');
    lines.push(
      `${result.id}: two servers / one ${decimals(ratio, 2)} (target >= ${TWO_INSTANCE_RATIO_TARGET}${verdict(ratio >= TWO_INSTANCE_RATIO_TARGET)})` +
        (locked === undefined || locked === null
          ? ''
          : `; lock waits on two ${percent(locked)} (target < ${percent(LOCK_WAIT_TARGET)}${verdict(locked < LOCK_WAIT_TARGET)})`),
    );
  }
  for (const result of run.scenarios) if (result.replica !== undefined) lines.push(...describeReplica(result.replica));
  for (const result of run.scenarios) {
    if (result.delivery === undefined) continue;
    const { streams, writesAsked, events, stream, fewestOnAStream, webhook } = result.delivery;
    const verdict = (p99: number) => `(target p99 < ${DELIVERY_P99_TARGET_MS} ms: ${p99 < DELIVERY_P99_TARGET_MS ? 'met' : 'MISSED'})`;
    lines.push(
      `events: ${events} articles at ${writesAsked}/s asked; ${streams} live streams: p50 ${stream.p50} ms, p99 ${stream.p99} ms, ` +
        `max ${stream.max} ms ${verdict(stream.p99)}, fewest on one stream ${fewestOnAStream}/${events}; webhook: ${webhook.received}/${events} ` +
        `delivered, p50 ${webhook.p50} ms, p99 ${webhook.p99} ms, max ${webhook.max} ms ${verdict(webhook.p99)}`,
    );
  }
  const secondLog = run.secondServerLog === undefined ? '' : `, second server's: ${run.secondServerLog}`;
  const replicaLogs = run.replicaServerLogs === undefined ? '' : `, replica servers': ${run.replicaServerLogs.join(' ')}`;
  lines.push(`server RSS, highest over the run: ${megabytes(run.rssMaxBytes)} MB; server log: ${run.serverLog}${secondLog}${replicaLogs}`);
  if (run.error !== undefined) lines.push(`RUN STOPPED EARLY: ${run.error}`);
  return lines.join('\n');
}

export function writeResults(file: string, results: object): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}
