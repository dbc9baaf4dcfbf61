import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { Argon2Baseline } from './argon2-baseline.js';
import type { DatabaseKind } from './databases.js';
import type { Answer, LoadResult } from './load.js';
import type { PhaseTiming } from './progress.js';
import type { ScenarioId } from './scenarios.js';
import type { ScaleName } from './seed-data.js';

export interface ScenarioResult {
  id: ScenarioId;
  title: string;
  /** Median body size of the scenario's answers, the size the ceiling answers with. */
  responseBytes: number;
  server: LoadResult;
  ceiling: LoadResult;
  /** server req/s / ceiling req/s. */
  ratio: number;
  rssMaxBytes: number | null;
  /** Server CPU (all its threads) per answered request over the measured seconds, in µs; `null` without /proc. */
  cpuMicrosPerRequest: number | null;
  /** A non-2xx answer to one of the scenario's requests, sent on its own, to show what went wrong. */
  failure?: Pick<Answer, 'status' | 'body'> & { request: string };
  /** Only for `mixed`: the same reads beside steady writes; `server` above is the reads alone. */
  mixed?: MixedResult[];
  /** Only for `login`: how close it gets to bare argon2, and whether other requests stay fast meanwhile. */
  login?: { argon2: Argon2Baseline; ratio: number; tagsAlongside: LoadResult };
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
  /** The server's CACHE setting. */
  cache: 'on' | 'off';
  seed: { reused: boolean; phases: PhaseTiming[] };
  serverLog: string;
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
    decimals(result.ceiling.requestsPerSecond, 0),
    decimals(result.ratio, 3),
    megabytes(result.rssMaxBytes),
    result.cpuMicrosPerRequest === null ? '-' : decimals(result.cpuMicrosPerRequest, 0),
  ]);
  const lines = [
    `== ${run.database} / ${run.scale}, caches ${run.cache} (${seeded}) ==`,
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
  lines.push(`server RSS, highest over the run: ${megabytes(run.rssMaxBytes)} MB; server log: ${run.serverLog}`);
  if (run.error !== undefined) lines.push(`RUN STOPPED EARLY: ${run.error}`);
  return lines.join('\n');
}

export function writeResults(file: string, results: object): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}
