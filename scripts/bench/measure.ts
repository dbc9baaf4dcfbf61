import type { Argon2Baseline } from './argon2-baseline.js';
import type { Ceiling } from './ceiling.js';
import { runLoad, send, type Answer, type LoadResult, type RequestSource, type RequestSpec } from './load.js';
import type { ScenarioResult } from './report.js';
import { SCENARIO_TITLES, type Scenario } from './scenarios.js';
import { watchRss, type RunningServer } from './server.js';

export interface MeasureSettings {
  connections: number;
  warmupSeconds: number;
  seconds: number;
}

export interface MeasureContext {
  server: RunningServer;
  ceiling: Ceiling;
  settings: MeasureSettings;
  /** Measured once per bench run, when the first login scenario needs it. */
  argon2: () => Promise<Argon2Baseline>;
}

/** Enough to find a request that fails on its own; one that fails only under load may not show up. */
const MAX_FAILURE_PROBES = 100;
/** A light, steady client: its latency shows whether the event loop stays free while logins load the thread pool. */
const ALONGSIDE_LOGIN_CONNECTIONS = 1;
/** A client polling now and then, not a second load: it measures the event loop, without taking the cores from argon2. */
const ALONGSIDE_LOGIN_RATE = 50;
const TAGS_REQUEST: RequestSpec = { method: 'GET', path: '/api/tags' };

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

async function warmThenMeasure(base: string, next: RequestSource, settings: MeasureSettings, duringMeasurement?: () => Promise<LoadResult>) {
  if (settings.warmupSeconds > 0) await runLoad(base, next, { connections: settings.connections, seconds: settings.warmupSeconds });
  return Promise.all([runLoad(base, next, { connections: settings.connections, seconds: settings.seconds }), duringMeasurement?.()]);
}

/**
 * The scenario against the server, then the same requests, connections and durations against the ceiling server
 * answering with a body of the same size, so that the ratio says how much of the machine's HTTP capacity is left.
 */
export async function measureScenario(scenario: Scenario, context: MeasureContext): Promise<ScenarioResult> {
  const { server, ceiling, settings } = context;
  const sized: Answer[] = [];
  for (let i = 0; i < scenario.variety; i++) sized.push(await send(server.base, scenario.next()));
  const responseBytes = median(sized.map((answer) => answer.bytes));

  const rss = watchRss(server.pid);
  const [measured, tagsAlongside] = await warmThenMeasure(
    server.base,
    scenario.next,
    settings,
    scenario.id === 'login'
      ? () => runLoad(server.base, () => TAGS_REQUEST, { connections: ALONGSIDE_LOGIN_CONNECTIONS, seconds: settings.seconds, rate: ALONGSIDE_LOGIN_RATE })
      : undefined,
  );
  const rssMaxBytes = rss.stop();

  await ceiling.setBodySize(responseBytes);
  const [bare] = await warmThenMeasure(ceiling.base, scenario.next, settings);

  let failure = sized.find((answer) => answer.status >= 300);
  for (let probe = 0; failure === undefined && measured.non2xx > 0 && probe < MAX_FAILURE_PROBES; probe++) {
    const answer = await send(server.base, scenario.next());
    if (answer.status >= 300) failure = answer;
  }

  const result: ScenarioResult = {
    id: scenario.id,
    title: SCENARIO_TITLES[scenario.id],
    responseBytes,
    server: measured,
    ceiling: bare,
    ratio: measured.requestsPerSecond / bare.requestsPerSecond,
    rssMaxBytes,
    ...(failure && { failure: describeFailure(failure) }),
  };
  if (tagsAlongside !== undefined) {
    const argon2 = await context.argon2();
    result.login = { argon2, ratio: measured.requestsPerSecond / argon2.verifiesPerSecond, tagsAlongside };
  }
  return result;
}
