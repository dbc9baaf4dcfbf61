import autocannon from 'autocannon';

export type Method = 'GET' | 'POST' | 'DELETE';

/** One request as a client sends it; the bench and the ceiling get exactly the same ones. */
export interface RequestSpec {
  method: Method;
  path: string;
  token?: string;
  body?: unknown;
  /** The ETag of the copy the client holds: the answer is a 304 while it is current. */
  ifNoneMatch?: string;
}

/** The next request to send; each call may give a different one (rotation, unique titles). */
export type RequestSource = () => RequestSpec;

/**
 * Closed loop: `connections` requests in flight, each sent when the last was answered. Open loop: `rate` requests
 * per second at even intervals whatever the answers, as independent users send them.
 */
export type LoadSettings = { seconds: number } & ({ connections: number; rate?: undefined } | { rate: number; connections?: undefined });

export interface LoadResult {
  requestsPerSecond: number;
  latencyMs: { p50: number; p99: number; average: number; max: number };
  requests: number;
  non2xx: number;
  /** Connection errors, timeouts included. */
  errors: number;
  timeouts: number;
  /** Errors by code (ECONNRESET, HPE_..., or the message when there is no code). */
  errorCodes: Record<string, number>;
  statusCodes: Record<string, number>;
  seconds: number;
}

const REQUEST_TIMEOUT_SECONDS = 10;

function encode(spec: RequestSpec): { headers: Record<string, string>; body?: string } {
  const headers: Record<string, string> = {};
  if (spec.token !== undefined) headers.authorization = `Token ${spec.token}`;
  if (spec.ifNoneMatch !== undefined) headers['if-none-match'] = spec.ifNoneMatch;
  if (spec.body === undefined) return { headers };
  headers['content-type'] = 'application/json';
  return { headers, body: JSON.stringify(spec.body) };
}

/** Answers that are not what the request asked for: a 304 to a revalidation is as good as a 200. */
export const isAnswered = (status: number) => (status >= 200 && status < 300) || status === 304;
const unanswered = (statusCodes: Record<string, number>) =>
  Object.entries(statusCodes).reduce((sum, [code, count]) => (isAnswered(Number(code)) ? sum : sum + count), 0);

const percentile = (sorted: number[], share: number) => sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0;

/**
 * One request every 1/rate seconds for `seconds`, each timed on its own. autocannon's rate limit sends each
 * connection's quota at the start of every second, so a rate of 20/s arrived as bursts of 20 at once and its
 * latency measured the burst's queue, not the server.
 */
async function runPaced(bases: readonly string[], next: RequestSource, seconds: number, rate: number): Promise<LoadResult> {
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  const errorCodes: Record<string, number> = {};
  let timeouts = 0;
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let sent = 0; sent < seconds * rate; sent++) {
    const due = started + (sent * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const spec = next();
    const { headers, body } = encode(spec);
    const sentAt = performance.now();
    inFlight.push(
      fetch(`${bases[sent % bases.length]}${spec.path}`, {
        method: spec.method,
        headers,
        body,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_SECONDS * 1000),
      }).then(
        async (response) => {
          await response.arrayBuffer();
          latencies.push(performance.now() - sentAt);
          statusCodes[response.status] = (statusCodes[response.status] ?? 0) + 1;
        },
        (error: Error) => {
          if (error.name === 'TimeoutError') timeouts++;
          const code = String((error.cause as { code?: string } | undefined)?.code ?? error.name);
          errorCodes[code] = (errorCodes[code] ?? 0) + 1;
        },
      ),
    );
  }
  await Promise.all(inFlight);
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const non2xx = unanswered(statusCodes);
  const errors = Object.values(errorCodes).reduce((sum, count) => sum + count, 0);
  return {
    requestsPerSecond: latencies.length / elapsed,
    latencyMs: {
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      average: latencies.reduce((sum, value) => sum + value, 0) / Math.max(1, latencies.length),
      max: latencies.at(-1) ?? 0,
    },
    requests: latencies.length,
    non2xx,
    errors,
    timeouts,
    errorCodes,
    statusCodes,
    seconds: elapsed,
  };
}

/**
 * Keeps `connections` requests in flight for `seconds`, each connection sending its next request when answered.
 * Given several servers, the connections go to them in turn (autocannon's round robin): an even split when the
 * connections are a multiple of the servers, with one latency histogram over all of them.
 */
export async function runLoad(base: string | readonly string[], next: RequestSource, settings: LoadSettings): Promise<LoadResult> {
  if (settings.rate !== undefined) return runPaced(typeof base === 'string' ? [base] : base, next, settings.seconds, settings.rate);
  const errorCodes: Record<string, number> = {};
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: typeof base === 'string' ? base : [...base],
        connections: settings.connections,
        duration: settings.seconds,
        timeout: REQUEST_TIMEOUT_SECONDS,
        requests: [
          {
            setupRequest(request) {
              const spec = next();
              const { headers, body } = encode(spec);
              return { ...request, method: spec.method, path: spec.path, headers, body };
            },
          },
        ],
      },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('reqError', (error) => {
      const code = error.code ?? error.message;
      errorCodes[code] = (errorCodes[code] ?? 0) + 1;
    });
  });
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, { count }]) => [code, count]));
  return {
    requestsPerSecond: result.requests.average,
    latencyMs: { p50: result.latency.p50, p99: result.latency.p99, average: result.latency.average, max: result.latency.max },
    requests: result.requests.total,
    non2xx: unanswered(statusCodes),
    errors: result.errors,
    timeouts: result.timeouts,
    errorCodes,
    statusCodes,
    seconds: result.duration,
  };
}

export interface Answer {
  spec: RequestSpec;
  status: number;
  body: string;
  bytes: number;
  etag: string | null;
}

/** One request outside any measurement: to size the ceiling's answers and to show what a failing request gets. */
export async function send(base: string, spec: RequestSpec): Promise<Answer> {
  const { headers, body } = encode(spec);
  const response = await fetch(`${base}${spec.path}`, { method: spec.method, headers, body }).catch((error: Error) => {
    // fetch says only "fetch failed"; the socket error that explains it is its cause.
    throw new Error(`${spec.method} ${spec.path} failed: ${String((error.cause as Error | undefined)?.message ?? error.message)}`, {
      cause: error,
    });
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return { spec, status: response.status, body: bytes.toString('utf8'), bytes: bytes.length, etag: response.headers.get('etag') };
}
