/** The part of autocannon 8's programmatic API the bench uses; the package ships no types. */
declare module 'autocannon' {
  namespace autocannon {
    interface Histogram {
      average: number;
      mean: number;
      max: number;
      total: number;
      p50: number;
      p99: number;
    }

    interface RawRequest {
      method: string;
      path: string;
      headers: Record<string, string>;
      body?: string | Buffer;
    }

    interface Request {
      /** Called before each request is sent; returns the request to send. */
      setupRequest?: (request: RawRequest, context: Record<string, unknown>) => RawRequest;
    }

    interface Options {
      /** Several: the connections go to them in turn. */
      url: string | string[];
      connections?: number;
      /** Seconds. */
      duration?: number;
      /** Requests per second over all connections. */
      overallRate?: number;
      /** Seconds a request may take before it counts as a timeout (and an error). */
      timeout?: number;
      requests?: Request[];
    }

    interface Result {
      requests: Histogram;
      /** Milliseconds. */
      latency: Histogram;
      errors: number;
      timeouts: number;
      non2xx: number;
      /** Seconds. */
      duration: number;
      statusCodeStats: Record<string, { count: number }>;
    }
  }

  namespace autocannon {
    interface Instance {
      /** A request that got no response: a socket error, a parse error or a timeout. */
      on(event: 'reqError', listener: (error: Error & { code?: string }) => void): Instance;
    }
  }

  function autocannon(options: autocannon.Options, done: (error: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export = autocannon;
}
