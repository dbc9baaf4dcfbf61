import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { REPLICA_POLL_MS } from '../../src/db/replicas.js';
import { type RunningServer, type ServerOptions, startServer } from './server.js';

/** How long the replica servers may take to find their replica up (polled, caught up) after they answer. */
const REPLICA_UP_TIMEOUT_MS = 60_000;
const REPLICA_UP_POLL_MS = 250;
/**
 * PostgreSQL 15 publishes a busy backend's transaction counts at most once a second, at a commit; what a backend
 * counted in its last second before it went idle waits for its idle timeout (PGSTAT_IDLE_INTERVAL, 10 s) or its
 * exit. Measured here: 3 s of `select 1` on 20 connections showed a third of its count until 10 s after it ended.
 * So the counts are read this long after a load, and no load before leaks into the next count.
 */
const STATS_SETTLE_MS = 11_000;

/** What GET /health/ready says of the replicas (src/plugins/health.ts). */
interface ReadyAnswer {
  replicas?: { name: string; state: string; lagMs: number | null }[];
}

/** The replicas as each server's /health/ready lists them; '' where every one is up. */
async function replicasNotUp(bases: readonly string[]): Promise<string> {
  const problems: string[] = [];
  for (const base of bases) {
    const answer = await fetch(`${base}/health/ready`)
      .then((response) => response.json() as Promise<ReadyAnswer>)
      .catch((error: Error) => error);
    if (answer instanceof Error) problems.push(`${base}: ${answer.message}`);
    else if (answer.replicas === undefined || answer.replicas.length === 0) problems.push(`${base}: no replicas listed`);
    else {
      for (const replica of answer.replicas) if (replica.state !== 'up') problems.push(`${base}: ${replica.name} ${replica.state}`);
    }
  }
  return problems.join('; ');
}

/** Resolves once every server's /health/ready reports each of its replicas `up`. */
export async function waitForReplicasUp(bases: readonly string[]): Promise<void> {
  const deadline = Date.now() + REPLICA_UP_TIMEOUT_MS;
  for (;;) {
    const problems = await replicasNotUp(bases);
    if (problems === '') return;
    if (Date.now() > deadline) throw new Error(`the replica was not up within ${REPLICA_UP_TIMEOUT_MS / 1000} s: ${problems}`);
    await sleep(REPLICA_UP_POLL_MS);
  }
}

/** Servers started together, once each reports its replicas up; if any fails, the others are stopped. */
export async function startReplicaServers(options: readonly ServerOptions[]): Promise<RunningServer[]> {
  const starts = await Promise.allSettled(options.map(startServer));
  const servers = starts.flatMap((start) => (start.status === 'fulfilled' ? [start.value] : []));
  try {
    const failed = starts.find((start) => start.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    await waitForReplicasUp(servers.map((server) => server.base));
    return servers;
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()));
    throw error;
  }
}

/** Statements (or transactions) in the bench database, on the primary and on the replica. */
export interface OnEach {
  primary: number;
  replica: number;
}

/** Transactions committed in the bench database on each server between two reads `seconds` apart. */
export interface TransactionCounts extends OnEach {
  seconds: number;
}

export interface TransactionCounter {
  /** Counts from now (once the load before has been published) until the returned stop(). */
  start(): Promise<{ stop(): Promise<TransactionCounts> }>;
}

/** `database`'s committed transactions on one server, read through that server's own database (`url`): never counted in. */
async function committed(url: string, database: string): Promise<number> {
  // A fresh connection: no statistics snapshot of an earlier read.
  const client = new pg.Client({ connectionString: url, application_name: 'conduit-bench-transaction-counter' });
  await client.connect();
  try {
    const { rows } = await client.query<{ committed: string }>(
      'select xact_commit::text as committed from pg_stat_database where datname = $1',
      [database],
    );
    if (rows[0] === undefined) throw new Error(`pg_stat_database has no row for ${database} on ${new URL(url).host}`);
    return Number(rows[0].committed);
  } finally {
    await client.end();
  }
}

/**
 * pg_stat_database.xact_commit of the bench database on the primary and on the replica. Every statement a server
 * runs outside a transaction is a transaction of its own, so the counts are statements, transactions and polls
 * among them. `primaryUrl` and `replicaUrl` are the servers' own databases (--postgres-url, --replica-url).
 */
export function openTransactionCounter(primaryUrl: string, replicaUrl: string, database: string): TransactionCounter {
  const read = async () => {
    await sleep(STATS_SETTLE_MS);
    const [primary, replica] = await Promise.all([committed(primaryUrl, database), committed(replicaUrl, database)]);
    return { primary, replica, at: performance.now() };
  };
  return {
    async start() {
      const before = await read();
      return {
        async stop() {
          const after = await read();
          return {
            primary: after.primary - before.primary,
            replica: after.replica - before.replica,
            seconds: (after.at - before.at) / 1000,
          };
        },
      };
    },
  };
}

/**
 * The primary's share of the read statements: each server's transactions during reads beside writes, less those
 * during the same writes alone (the writes, their WAL positions, the replica polls); null when no reads were seen.
 */
export function primaryReadShare(mixed: OnEach, writesOnly: OnEach): OnEach & { share: number | null } {
  const primary = Math.max(0, mixed.primary - writesOnly.primary);
  const replica = Math.max(0, mixed.replica - writesOnly.replica);
  return { primary, replica, share: primary + replica === 0 ? null : primary / (primary + replica) };
}

/**
 * How many replica polls `servers` servers send each database server in `seconds` (one to the primary, one to each
 * replica, every REPLICA_POLL_MS). A poll touches no table, and PostgreSQL 15 publishes the count of such a
 * transaction only once its backend touches a table or exits: with the reads, whose connections the polls share,
 * not with the writes alone. So the subtraction may leave up to this many polls in each server's read count.
 */
export const unsubtractedPolls = (servers: number, seconds: number) => Math.round((servers * seconds * 1000) / REPLICA_POLL_MS);
