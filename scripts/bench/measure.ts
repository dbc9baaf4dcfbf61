import type { Argon2Baseline } from './argon2-baseline.js';
import type { Ceiling } from './ceiling.js';
import { measureDelivery } from './delivery.js';
import { type Answer, isAnswered, type LoadResult, type RequestSource, type RequestSpec, runLoad, send } from './load.js';
import type { LockSampler } from './locks.js';
import { primaryReadShare, type TransactionCounter, unsubtractedPolls, waitForReplicasUp } from './replicas.js';
import type { InstancesRun, MixedResult, ReplicaResult, ReplicaRun, ScenarioResult } from './report.js';
import { SCENARIO_TITLES, type Scenario } from './scenarios.js';
import { cpuSeconds, type RunningServer, watchRss } from './server.js';

export interface MeasureSettings {
  connections: number;
  warmupSeconds: number;
  seconds: number;
}

export interface MeasureContext {
  server: RunningServer;
  /** Another server on the same database, for the two-instance scenarios: started when the first one needs it. */
  secondServer: () => Promise<RunningServer>;
  /** PostgreSQL only: reads pg_stat_activity during the two-instance scenarios. */
  lockSampler?: () => Promise<LockSampler>;
  /**
   * PostgreSQL with a replica URL only, for mixed-replica: two servers reading from the replica (started, and their
   * replica up, when first asked for), and the bench database's committed transactions on the primary and the replica.
   */
  replica?: { servers: () => Promise<RunningServer[]>; transactions: TransactionCounter };
  ceiling: Ceiling;
  settings: MeasureSettings;
  /** Measured once per bench run, when the first login scenario needs it. */
  argon2: () => Promise<Argon2Baseline>;
}

/** Enough to find a request that fails on its own; one that fails only under load may not show up. */
const MAX_FAILURE_PROBES = 100;
/** A client polling now and then, not a second load: it measures the event loop, without taking the cores from argon2. */
const ALONGSIDE_LOGIN_RATE = 50;
const TAGS_REQUEST: RequestSpec = { method: 'GET', path: '/api/tags' };
/** The steady write rates the mixed scenario's reads are measured beside: a trickle, and a busy site. */
export const MIXED_WRITE_RATES = [20, 100] as const;
/** The write rate of mixed-replica: the trickle. */
const REPLICA_WRITE_RATE = MIXED_WRITE_RATES[0];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : Math.round((sorted[middle - 1]! + sorted[middle]!) / 2);
}

const describeFailure = (answer: Answer) => ({
  request: `${answer.spec.method} ${answer.spec.path}`,
  status: answer.status,
  body: answer.body.slice(0, 500),
});

interface MeasureOptions {
  pids?: readonly number[];
  /** Another load for as many seconds, beside the measured one. */
  alongside?: (seconds: number) => Promise<LoadResult>;
  /** Runs `alongside` beside the warm-up too. */
  warmAlongside?: true;
  locks?: LockSampler;
  transactions?: TransactionCounter;
}

/**
 * Warm-up, then the measured load, with `alongside` running beside it. Given the servers' pids, also their CPU per
 * request in microseconds over the measured seconds (every answered request counted, `alongside`'s too): the
 * figure least moved by whatever else the machine runs. Given a lock sampler, what the database's backends waited
 * on over the measured seconds. Given a transaction counter, the transactions committed over the warm-up and the
 * measured seconds: the counter waits for the counts of the load before to be published, long enough for the
 * servers' pools to close their idle connections, and the warm-up opens them again.
 */
async function warmThenMeasure(
  base: string | readonly string[],
  next: RequestSource,
  settings: MeasureSettings,
  options: MeasureOptions = {},
) {
  const counting = await options.transactions?.start();
  let warmup: LoadResult | undefined;
  if (settings.warmupSeconds > 0) {
    [warmup] = await Promise.all([
      runLoad(base, next, { connections: settings.connections, seconds: settings.warmupSeconds }),
      options.warmAlongside && options.alongside?.(settings.warmupSeconds),
    ]);
  }
  const cpuBefore = options.pids === undefined ? null : cpuSeconds(options.pids);
  const sampling = options.locks?.start();
  const [measured, alongside] = await Promise.all([
    runLoad(base, next, { connections: settings.connections, seconds: settings.seconds }),
    options.alongside?.(settings.seconds),
  ]);
  const lockWaits = (await sampling?.stop()) ?? null;
  const cpuAfter = options.pids === undefined ? null : cpuSeconds(options.pids);
  const transactions = (await counting?.stop()) ?? null;
  const requests = measured.requests + (alongside?.requests ?? 0);
  const cpuMicrosPerRequest = cpuBefore === null || cpuAfter === null || requests === 0 ? null : ((cpuAfter - cpuBefore) / requests) * 1e6;
  return { warmup, measured, alongside, cpuMicrosPerRequest, lockWaits, transactions };
}

/** The scenario's load on one server, then split over it and a second one on the same database, lock waits sampled. */
async function measureInstances(scenario: Scenario, context: MeasureContext): Promise<{ one: InstancesRun; two: InstancesRun }> {
  const servers = [context.server, await context.secondServer()];
  const locks = await context.lockSampler?.();
  const measure = async (measuring: readonly RunningServer[]): Promise<InstancesRun> => {
    const { measured, cpuMicrosPerRequest, lockWaits } = await warmThenMeasure(
      measuring.map((server) => server.base),
      scenario.next,
      context.settings,
      { pids: measuring.map((server) => server.pid), locks },
    );
    return { servers: measuring.length, load: measured, cpuMicrosPerRequest, lockWaits };
  };
  return { one: await measure(servers.slice(0, 1)), two: await measure(servers) };
}

/**
 * The reads (warmed up, then measured) with writes paced at `rate` beside the measured seconds (and beside the
 * warm-up too with `warmAlongside`), on the same servers.
 */
async function besideWrites(
  base: string | readonly string[],
  reads: RequestSource,
  writes: RequestSource,
  rate: number,
  settings: MeasureSettings,
  options: Omit<MeasureOptions, 'alongside'> = {},
) {
  const { measured, alongside, ...rest } = await warmThenMeasure(base, reads, settings, {
    ...options,
    alongside: (seconds) => runLoad(base, writes, { seconds, rate }),
  });
  return { reads: measured, writes: alongside!, ...rest };
}

/** The same reads again, each time beside writes at one of MIXED_WRITE_RATES, compared with the reads measured alone. */
async function measureBesideWrites(
  base: string,
  reads: RequestSource,
  writes: RequestSource,
  settings: MeasureSettings,
  alone: LoadResult,
): Promise<MixedResult[]> {
  const results: MixedResult[] = [];
  for (const rate of MIXED_WRITE_RATES) {
    const measured = await besideWrites(base, reads, writes, rate, settings);
    results.push({
      writesAsked: rate,
      reads: measured.reads,
      writes: measured.writes,
      ratio: measured.reads.requestsPerSecond / alone.requestsPerSecond,
    });
  }
  return results;
}

/**
 * The reads beside REPLICA_WRITE_RATE writes/s on the one server on the primary alone, then split over two servers
 * reading from the replica (the same connections in all, half to each), then the same writes alone on those two, as
 * long: the transactions of that last run, on each database server, are what the servers commit besides the reads.
 * The writes run beside the warm-ups too: the transactions are counted over them, and the writers' connections are
 * open when the measured seconds start.
 */
async function measureReplica(scenario: Scenario, context: MeasureContext, settings: MeasureSettings): Promise<ReplicaResult> {
  const { writes } = scenario;
  if (context.replica === undefined || writes === undefined) throw new Error(`${scenario.id} needs writes, PostgreSQL and a replica URL`);
  const rate = REPLICA_WRITE_RATE;
  const { transactions } = context.replica;
  const run = async (servers: readonly RunningServer[], counter?: TransactionCounter) => {
    const bases = servers.map((server) => server.base);
    const measured = await besideWrites(bases, scenario.next, writes, rate, settings, {
      pids: servers.map((server) => server.pid),
      warmAlongside: true,
      ...(counter && { transactions: counter }),
    });
    const result: ReplicaRun = {
      servers: servers.length,
      reads: measured.reads,
      writes: measured.writes,
      cpuMicrosPerRequest: measured.cpuMicrosPerRequest,
    };
    return { result, warmupReads: measured.warmup?.requests ?? 0, transactions: measured.transactions };
  };
  const primaryAlone = await run([context.server]);
  const servers = await context.replica.servers();
  const bases = servers.map((server) => server.base);
  // Up when they started; the primary-alone run since may have left it behind.
  await waitForReplicasUp(bases);
  const withReplica = await run(servers, transactions);
  const counting = await transactions.start();
  if (settings.warmupSeconds > 0) await runLoad(bases, writes, { seconds: settings.warmupSeconds, rate });
  const writesOnly = await runLoad(bases, writes, { seconds: settings.seconds, rate });
  const writesOnlyCounts = await counting.stop();
  const mixedCounts = withReplica.transactions!;
  const { primary, replica, share } = primaryReadShare(mixedCounts, writesOnlyCounts);
  const readRequests = withReplica.warmupReads + withReplica.result.reads.requests;
  return {
    writesAsked: rate,
    primaryAlone: primaryAlone.result,
    withReplica: withReplica.result,
    ratio: withReplica.result.reads.requestsPerSecond / primaryAlone.result.reads.requestsPerSecond,
    writesOnly,
    readShare: {
      source: 'pg_stat_database.xact_commit',
      mixed: mixedCounts,
      writesOnly: writesOnlyCounts,
      reads: { primary, replica },
      pollsUnsubtracted: unsubtractedPolls(servers.length, mixedCounts.seconds),
      primaryShare: share,
      statementsPerRead: readRequests === 0 ? null : (primary + replica) / readRequests,
    },
  };
}

/**
 * The scenario against the server, then the same requests, connections and durations against the ceiling server
 * answering with a body of the same size, so that the ratio says how much of the machine's HTTP capacity is left.
 * A two-instance scenario instead compares one server with two on the same database, and has no ceiling.
 */
export async function measureScenario(scenario: Scenario, context: MeasureContext): Promise<ScenarioResult> {
  const { server, ceiling } = context;
  const settings = { ...context.settings, connections: scenario.connections ?? context.settings.connections };
  if (scenario.deliveryAuthors !== undefined) {
    // A latency, not a throughput: the ceiling server has no outbox to compare it with.
    const rss = watchRss([server.pid]);
    const { writes, delivery } = await measureDelivery(server.base, scenario.next, scenario.deliveryAuthors, settings.seconds);
    return {
      id: scenario.id,
      title: SCENARIO_TITLES[scenario.id],
      responseBytes: 0,
      server: writes,
      ceiling: null,
      ratio: null,
      rssMaxBytes: rss.stop(),
      cpuMicrosPerRequest: null,
      delivery,
    };
  }
  const sized: Answer[] = [];
  for (let i = 0; i < scenario.variety; i++) sized.push(await send(server.base, scenario.next()));
  const responseBytes = median(sized.map((answer) => answer.bytes));

  const others = scenario.twoInstances
    ? [await context.secondServer()]
    : scenario.replica && context.replica !== undefined
      ? await context.replica.servers()
      : [];
  const rss = watchRss([server, ...others].map((running) => running.pid));
  let measured: LoadResult;
  let cpuMicrosPerRequest: number | null;
  let tagsAlongside: LoadResult | undefined;
  let instances: ScenarioResult['instances'];
  let replica: ReplicaResult | undefined;
  if (scenario.replica) {
    replica = await measureReplica(scenario, context, settings);
    ({ reads: measured, cpuMicrosPerRequest } = replica.withReplica);
  } else if (scenario.twoInstances) {
    const { one, two } = await measureInstances(scenario, context);
    ({ load: measured, cpuMicrosPerRequest } = two);
    instances = { one, two, ratio: two.load.requestsPerSecond / one.load.requestsPerSecond };
  } else {
    ({
      measured,
      alongside: tagsAlongside,
      cpuMicrosPerRequest,
    } = await warmThenMeasure(server.base, scenario.next, settings, {
      pids: [server.pid],
      ...(scenario.id === 'login' && {
        alongside: (seconds) => runLoad(server.base, () => TAGS_REQUEST, { seconds, rate: ALONGSIDE_LOGIN_RATE }),
      }),
    }));
  }
  // mixed-replica measured its reads beside writes already.
  const mixed =
    scenario.writes === undefined || scenario.replica
      ? undefined
      : await measureBesideWrites(server.base, scenario.next, scenario.writes, settings, measured);
  const rssMaxBytes = rss.stop();

  let bare: LoadResult | null = null;
  if (!scenario.twoInstances) {
    await ceiling.setBodySize(responseBytes);
    ({ measured: bare } = await warmThenMeasure(ceiling.base, scenario.next, settings));
  }

  let failure = sized.find((answer) => !isAnswered(answer.status));
  for (let probe = 0; failure === undefined && measured.non2xx > 0 && probe < MAX_FAILURE_PROBES; probe++) {
    const answer = await send(server.base, scenario.next());
    if (!isAnswered(answer.status)) failure = answer;
  }

  const result: ScenarioResult = {
    id: scenario.id,
    title: SCENARIO_TITLES[scenario.id],
    responseBytes,
    server: measured,
    ceiling: bare,
    ratio: bare && measured.requestsPerSecond / bare.requestsPerSecond,
    rssMaxBytes,
    cpuMicrosPerRequest,
    ...(failure && { failure: describeFailure(failure) }),
    ...(mixed && { mixed }),
    ...(instances && { instances }),
    ...(replica && { replica }),
  };
  if (tagsAlongside !== undefined) {
    const argon2 = await context.argon2();
    result.login = { argon2, ratio: measured.requestsPerSecond / argon2.verifiesPerSecond, tagsAlongside };
  }
  return result;
}
