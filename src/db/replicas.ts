import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  PostgresDialect,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import type pg from 'pg';
import type { DatabaseLog } from './drivers/postgres.js';
import type { Database } from './schema.js';

/** A WAL position as one number; PostgreSQL writes it as two hexadecimal halves, `16/B374D848`. */
export function parseWalPosition(text: string): bigint {
  const [high = '0', low = '0'] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

/**
 * How often each process asks the primary where its WAL is and each replica how far it has replayed. A write's
 * position is compared with the replayed one from the last poll: a writer's reads go to the primary until a poll
 * after its write finds the replica caught up, so this bounds how long that takes, not whether the read is right.
 */
export const REPLICA_POLL_MS = 250;

/**
 * Errors after which the replica, not the statement, is at fault, so the statement is run again on the primary: the
 * connection refused, dropped or timed out, the server shutting down or starting (57P01-57P03), connection
 * exceptions (class 08), a query cancelled by a conflict with WAL replay (40001 on a standby), and a write that
 * reached a read-only server (25006). A statement timeout (57014) is the statement's own cost: not run again.
 */
const REPLICA_FAULT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P01',
  '57P02',
  '57P03',
  '40001',
  '25006',
]);
const CONNECTION_LOST = /connection terminated|connection error|timeout exceeded when trying to connect|not queryable/i;

function isReplicaFault(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (REPLICA_FAULT_CODES.has(code) || code.startsWith('08'))) return true;
  return CONNECTION_LOST.test(error.message);
}

export type ReplicaState = 'up' | 'lagging' | 'down';

export interface ReplicaStatus {
  /** host:port/database, without credentials. */
  name: string;
  state: ReplicaState;
  /** How far behind the primary it was at the last poll; null while it cannot be told (down, or never polled). */
  lagMs: number | null;
}

interface Replica {
  name: string;
  pool: pg.Pool;
  db: Kysely<Database>;
  /** What it had replayed at the last poll that reached it; null until one does, and while it is down. */
  replayed: bigint | null;
  lagMs: number | null;
  /** Why it takes no reads now: set by a failed poll or statement, cleared by the next poll that reaches it. */
  problem: string | null;
}

const nameOf = (url: string) => {
  const parsed = new URL(url);
  return `${parsed.host}${parsed.pathname}`;
};

/**
 * The primary's WAL position at the polls of the last stretch, oldest first: a replica that has replayed up to some
 * position lacks what the primary had written by the first poll past it, so its lag is at least the time since.
 */
interface PrimarySample {
  at: number;
  position: bigint;
}

/**
 * Streaming replicas of the primary that take reads outside transactions. Each is polled for how far it has replayed;
 * `reader` hands out one that is up, within the lag allowed, and past a given WAL position (a reader's own last write).
 */
export class ReplicaSet {
  private readonly replicas: Replica[];
  private readonly samples: PrimarySample[] = [];
  private nextTurn = 0;
  private polling: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly primary: pg.Pool,
    primaryDriver: () => Driver,
    replicaPools: { url: string; pool: pg.Pool }[],
    private readonly maxLagMs: number,
    private readonly log?: DatabaseLog,
  ) {
    this.replicas = replicaPools.map(({ url, pool }) => {
      const replica: Replica = { name: nameOf(url), pool, db: undefined as never, replayed: null, lagMs: null, problem: 'not polled yet' };
      replica.db = new Kysely<Database>({
        dialect: new RoutedDialect(pool, primaryDriver, (error) => this.markDown(replica, error)),
      });
      return replica;
    });
    void this.poll();
    this.timer = setInterval(() => void this.poll(), REPLICA_POLL_MS).unref();
  }

  /** A replica to read from that has replayed `position` (0 for any), in turns; undefined when none can. */
  reader(position: bigint): Kysely<Database> | undefined {
    const count = this.replicas.length;
    for (let step = 0; step < count; step++) {
      const index = (this.nextTurn + step) % count;
      const replica = this.replicas[index]!;
      if (this.isUsable(replica) && replica.replayed! >= position) {
        this.nextTurn = (index + 1) % count;
        return replica.db;
      }
    }
    return undefined;
  }

  statuses(): ReplicaStatus[] {
    return this.replicas.map((replica) => ({
      name: replica.name,
      state: replica.problem !== null || replica.replayed === null ? 'down' : this.isUsable(replica) ? 'up' : 'lagging',
      lagMs: replica.problem === null ? replica.lagMs : null,
    }));
  }

  /** The next poll's answer, for tests and for a probe that wants the state of now. */
  poll(): Promise<void> {
    this.polling ??= this.pollOnce().finally(() => {
      this.polling = null;
    });
    return this.polling;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.polling;
    // Ended here, not by Kysely: a Kysely that never ran a statement destroys nothing, and the polls used the pool.
    await Promise.all(
      this.replicas.map(async (replica) => {
        await replica.db.destroy();
        await replica.pool.end();
      }),
    );
  }

  private isUsable(replica: Replica): boolean {
    return replica.problem === null && replica.replayed !== null && replica.lagMs !== null && replica.lagMs <= this.maxLagMs;
  }

  private markDown(replica: Replica, error: unknown): void {
    if (replica.problem === null) this.log?.warn({ err: error, replica: replica.name }, 'a replica failed: its reads go to the primary');
    replica.problem = error instanceof Error ? error.message : String(error);
  }

  private async pollOnce(): Promise<void> {
    try {
      const { rows } = await this.primary.query<{ position: string }>('select pg_current_wal_lsn()::text as position');
      this.addSample(Date.now(), parseWalPosition(rows[0]!.position));
    } catch {
      // Without the primary's position no lag can be told; the replicas keep their last state until it answers.
      return;
    }
    await Promise.all(this.replicas.map((replica) => this.pollReplica(replica)));
  }

  private addSample(at: number, position: bigint): void {
    this.samples.push({ at, position });
    // Samples older than the lag allowed (and a poll's margin) can only say "too far behind", which the oldest kept says too.
    while (this.samples.length > 2 && this.samples[1]!.at < at - this.maxLagMs - REPLICA_POLL_MS) this.samples.shift();
  }

  private async pollReplica(replica: Replica): Promise<void> {
    try {
      const { rows } = await replica.pool.query<{ recovering: boolean; replayed: string | null }>(
        'select pg_is_in_recovery() as recovering, pg_last_wal_replay_lsn()::text as replayed',
      );
      const { recovering, replayed } = rows[0]!;
      // A promoted replica (failover) has its own history from then on: the primary's positions say nothing of it.
      if (!recovering || replayed === null) throw new Error('not a streaming replica (pg_is_in_recovery() is false)');
      replica.replayed = parseWalPosition(replayed);
      replica.lagMs = this.lagOf(replica.replayed);
      if (replica.problem !== null && replica.problem !== 'not polled yet') {
        this.log?.warn({ replica: replica.name }, 'a replica answers again: it takes reads once caught up');
      }
      replica.problem = null;
    } catch (error) {
      replica.replayed = null;
      replica.lagMs = null;
      this.markDown(replica, error);
    }
  }

  private lagOf(replayed: bigint): number {
    const firstAhead = this.samples.find((sample) => sample.position > replayed);
    if (firstAhead === undefined) return 0;
    // Behind even the oldest sample: how far is unknown (just after start there is one sample), so too far.
    if (firstAhead === this.samples[0]) return Math.max(Date.now() - firstAhead.at, this.maxLagMs + 1);
    return Date.now() - firstAhead.at;
  }
}

/** Statements Kysely builds that write: sent to the primary from the start. */
const WRITE_KINDS = new Set(['InsertQueryNode', 'UpdateQueryNode', 'DeleteQueryNode', 'MergeQueryNode']);

/**
 * A replica's connection that moves to the primary, for good, when the request asks for what only the primary does
 * (a transaction, a write, a streamed result) or when the replica fails under a statement, which then runs again on
 * the primary: the reads outside transactions sent here are single statements, safe to repeat.
 */
class RoutedConnection implements DatabaseConnection {
  onPrimary = false;

  constructor(
    public inner: DatabaseConnection,
    private readonly replica: Driver,
    private readonly primary: Driver,
    private readonly onFault: (error: unknown) => void,
  ) {}

  async moveToPrimary(): Promise<void> {
    if (this.onPrimary) return;
    const primaryConnection = await this.primary.acquireConnection();
    await this.replica.releaseConnection(this.inner);
    this.inner = primaryConnection;
    this.onPrimary = true;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (!this.onPrimary && WRITE_KINDS.has(query.query.kind)) await this.moveToPrimary();
    if (this.onPrimary) return this.inner.executeQuery<R>(query);
    try {
      return await this.inner.executeQuery<R>(query);
    } catch (error) {
      if (!isReplicaFault(error)) throw error;
      // A write the builder could not tell (raw SQL) refused as read-only is no fault of the replica's.
      if ((error as { code?: string }).code !== '25006') this.onFault(error);
      await this.moveToPrimary();
      return this.inner.executeQuery<R>(query);
    }
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize: number): AsyncIterableIterator<QueryResult<R>> {
    // A stream cut by a failing replica could not be resumed where it broke: it runs on the primary.
    await this.moveToPrimary();
    yield* this.inner.streamQuery<R>(query, chunkSize);
  }

  release(): Promise<void> {
    return (this.onPrimary ? this.primary : this.replica).releaseConnection(this.inner);
  }
}

/** The driver of a replica's Kysely: its connections are RoutedConnections, its transactions run on the primary. */
class RoutedDriver implements Driver {
  constructor(
    private readonly replica: Driver,
    private readonly primary: Driver,
    private readonly onFault: (error: unknown) => void,
  ) {}

  async init(): Promise<void> {
    await Promise.all([this.replica.init(), this.primary.init()]);
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    try {
      return new RoutedConnection(await this.replica.acquireConnection(), this.replica, this.primary, this.onFault);
    } catch (error) {
      if (!isReplicaFault(error)) throw error;
      this.onFault(error);
      return this.primary.acquireConnection();
    }
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    if (connection instanceof RoutedConnection) await connection.moveToPrimary();
    await this.primary.beginTransaction(innerOf(connection), settings);
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.primary.commitTransaction(innerOf(connection));
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.primary.rollbackTransaction(innerOf(connection));
  }

  async savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.primary.savepoint?.(innerOf(connection), name, compile);
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.primary.rollbackToSavepoint?.(innerOf(connection), name, compile);
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.primary.releaseSavepoint?.(innerOf(connection), name, compile);
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return connection instanceof RoutedConnection ? connection.release() : this.primary.releaseConnection(connection);
  }

  async destroy(): Promise<void> {
    // Both pools are ended by their owners: the primary's by its Kysely, the replica's by ReplicaSet.close.
  }
}

const innerOf = (connection: DatabaseConnection) => (connection instanceof RoutedConnection ? connection.inner : connection);

class RoutedDialect extends PostgresDialect {
  constructor(
    private readonly replicaPool: pg.Pool,
    private readonly primaryDriver: () => Driver,
    private readonly onFault: (error: unknown) => void,
  ) {
    super({ pool: replicaPool });
  }

  override createDriver(): Driver {
    return new RoutedDriver(new PostgresDialect({ pool: this.replicaPool }).createDriver(), this.primaryDriver(), this.onFault);
  }
}
