import type { Argon2Baseline } from './argon2-baseline.js';
import type { Ceiling } from './ceiling.js';
import { measureDelivery } from './delivery.js';
import { type Answer, isAnswered, type LoadResult, type RequestSource, type RequestSpec, runLoad, send } from './load.js';
import type { LockSampler } from './locks.js';
import type { InstancesRun, MixedResult, ScenarioResult } from './report.js';
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

/**
 * Warm-up, then the measured load, with `alongside` running beside it. Given the servers' pids, also their CPU per
 * request in microseconds over the measured seconds (every answered request counted, `alongside`'s too): the
 * figure least moved by whatever else the machine runs. Given a lock sampler, what the database's backends waited
 * on over the measured seconds.
 */
async function warmThenMeasure(
  base: string | readonly string[],
  next: RequestSource,
  settings: MeasureSettings,
  options: { pids?: readonly number[]; alongside?: () => Promise<LoadResult>; locks?: LockSampler } = {},
) {
  if (settings.warmupSeconds > 0) await runLoad(base, next, { connections: settings.connections, seconds: settings.warmupSeconds });
  const cpuBefore = options.pids === undefined ? null : cpuSeconds(options.pids);
  const sampling = options.locks?.start();
  const [measured, alongside] = await Promise.all([
    runLoad(base, next, { connections: settings.connections, seconds: settings.seconds }),
    options.alongside?.(),
  ]);
  const lockWaits = (await sampling?.stop()) ?? null;
  const cpuAfter = options.pids === undefined ? null : cpuSeconds(options.pids);
  const requests = measured.requests + (alongside?.requests ?? 0);
  const cpuMicrosPerRequest = cpuBefore === null || cpuAfter === null || requests === 0 ? null : ((cpuAfter - cpuBefore) / requests) * 1e6;
  return { measured, alongside, cpuMicrosPerRequest, lockWaits };
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
    const { measured, alongside } = await warmThenMeasure(base, reads, settings, {
      alongside: () => runLoad(base, writes, { seconds: settings.seconds, rate }),
    });
    results.push({ writesAsked: rate, reads: measured, writes: alongside!, ratio: measured.requestsPerSecond / alone.requestsPerSecond });
  }
  return results;
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

  const rss = watchRss(scenario.twoInstances ? [server.pid, (await context.secondServer()).pid] : [server.pid]);
  let measured: LoadResult;
  let cpuMicrosPerRequest: number | null;
  let tagsAlongside: LoadResult | undefined;
  let instances: ScenarioResult['instances'];
  if (scenario.twoInstances) {
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
        alongside: () => runLoad(server.base, () => TAGS_REQUEST, { seconds: settings.seconds, rate: ALONGSIDE_LOGIN_RATE }),
      }),
    }));
  }
  const mixed = scenario.writes && (await measureBesideWrites(server.base, scenario.next, scenario.writes, settings, measured));
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
  };
  if (tagsAlongside !== undefined) {
    const argon2 = await context.argon2();
    result.login = { argon2, ratio: measured.requestsPerSecond / argon2.verifiesPerSecond, tagsAlongside };
  }
  return result;
}
