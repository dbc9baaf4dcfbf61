import autocannon from 'autocannon';

export type Method = 'GET' | 'POST' | 'DELETE';

/** One request as a client sends it; the bench and the ceiling get exactly the same ones. */
export interface RequestSpec {
  method: Method;
  path: string;
  token?: string;
  body?: unknown;
}

/** The next request to send; each call may give a different one (rotation, unique titles). */
export type RequestSource = () => RequestSpec;

export interface LoadSettings {
  connections: number;
  seconds: number;
  /** Requests per second over all connections; unset means as fast as the server answers. */
  rate?: number;
}

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
  if (spec.body === undefined) return { headers };
  headers['content-type'] = 'application/json';
  return { headers, body: JSON.stringify(spec.body) };
}

/**
 * Keeps `connections` requests in flight for `seconds`, each connection sending its next request when answered.
 * Given several servers, the connections go to them in turn (autocannon's round robin): an even split when the
 * connections are a multiple of the servers, with one latency histogram over all of them.
 */
export async function runLoad(base: string | readonly string[], next: RequestSource, settings: LoadSettings): Promise<LoadResult> {
  const errorCodes: Record<string, number> = {};
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: typeof base === 'string' ? base : [...base],
        connections: settings.connections,
        duration: settings.seconds,
        ...(settings.rate !== undefined && { overallRate: settings.rate }),
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
  return {
    requestsPerSecond: result.requests.average,
    latencyMs: { p50: result.latency.p50, p99: result.latency.p99, average: result.latency.average, max: result.latency.max },
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    errorCodes,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, { count }]) => [code, count])),
    seconds: result.duration,
  };
}

export interface Answer {
  spec: RequestSpec;
  status: number;
  body: string;
  bytes: number;
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
  return { spec, status: response.status, body: bytes.toString('utf8'), bytes: bytes.length };
}
