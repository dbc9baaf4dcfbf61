import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

/** How often pg_stat_activity is read while a load runs. */
const SAMPLE_MS = 100;

/**
 * What the bench database's active backends (the servers' queries, the sampler left out) were waiting on while a
 * load ran, from pg_stat_activity read every SAMPLE_MS.
 */
export interface LockWaits {
  samples: number;
  /** Samples that found no active backend: they count in no mean below. */
  idleSamples: number;
  /** Active backends per sample, on average over the samples that found any. */
  activeMean: number;
  /**
   * Backends per sample inside a transaction but waiting for the server's next statement, on average over every
   * sample: a row lock they hold keeps the active ones waiting meanwhile.
   */
  idleInTransactionMean: number;
  /** The share of active backends whose wait_event_type is `Lock`, per sample, averaged over the samples that found any. */
  lockFraction: number | null;
  /**
   * Active backends summed over every sample, by `wait_event_type:wait_event` (`running` where a backend waits on
   * nothing: it is on a CPU or between two waits).
   */
  waits: Record<string, number>;
}

export interface LockSampler {
  /** Samples until the returned stop() is called. */
  start(): { stop(): Promise<LockWaits> };
  close(): Promise<void>;
}

/** One read of pg_stat_activity: active backends by `wait_event_type:wait_event`, and how many were idle in a transaction. */
export interface Sample {
  active: Record<string, number>;
  idleInTransaction: number;
}

const IDLE_IN_TRANSACTION = 'idle in transaction';

/** The database's backends by state and wait; the sampler's own query is active when it runs, so it leaves itself out. */
const BACKENDS_BY_WAIT = `
  select state, coalesce(wait_event_type || ':' || wait_event, 'running') as wait, count(*)::int as backends
  from pg_stat_activity
  where datname = current_database() and state in ('active', '${IDLE_IN_TRANSACTION}') and pid <> pg_backend_pid()
  group by 1, 2`;

/** The mean over the samples that saw any active backend. */
export function summarize(samples: readonly Sample[]): LockWaits {
  const waits: Record<string, number> = {};
  let busy = 0;
  let active = 0;
  let fractions = 0;
  let idleInTransaction = 0;
  for (const sample of samples) {
    idleInTransaction += sample.idleInTransaction;
    const backends = Object.values(sample.active).reduce((sum, n) => sum + n, 0);
    if (backends === 0) continue;
    busy++;
    active += backends;
    let locked = 0;
    for (const [wait, n] of Object.entries(sample.active)) {
      waits[wait] = (waits[wait] ?? 0) + n;
      if (wait.startsWith('Lock:')) locked += n;
    }
    fractions += locked / backends;
  }
  return {
    samples: samples.length,
    idleSamples: samples.length - busy,
    activeMean: busy === 0 ? 0 : active / busy,
    idleInTransactionMean: samples.length === 0 ? 0 : idleInTransaction / samples.length,
    lockFraction: busy === 0 ? null : fractions / busy,
    waits,
  };
}

/** One client of its own on the bench database (`url` is the servers' DATABASE_URL), open until close(). */
export async function openLockSampler(url: string): Promise<LockSampler> {
  const client = new pg.Client({ connectionString: url, application_name: 'conduit-bench-lock-sampler' });
  await client.connect();
  return {
    start() {
      const samples: Sample[] = [];
      let stopped = false;
      const loop = (async () => {
        while (!stopped) {
          const started = performance.now();
          const { rows } = await client.query<{ state: string; wait: string; backends: number }>(BACKENDS_BY_WAIT);
          const active = rows.filter((row) => row.state !== IDLE_IN_TRANSACTION);
          samples.push({
            active: Object.fromEntries(active.map((row) => [row.wait, row.backends])),
            idleInTransaction: rows.reduce((sum, row) => sum + (row.state === IDLE_IN_TRANSACTION ? row.backends : 0), 0),
          });
          await sleep(Math.max(0, SAMPLE_MS - (performance.now() - started)));
        }
      })();
      // A failed read ends the loop; stop() rethrows it, so it must not count as unhandled meanwhile.
      loop.catch(() => {});
      return {
        async stop() {
          stopped = true;
          await loop;
          return summarize(samples);
        },
      };
    },
    close: () => client.end(),
  };
}
