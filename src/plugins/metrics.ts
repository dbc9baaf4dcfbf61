import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { DatabaseHandle, PoolStats } from '../db/index.js';
import { machineRouteLogLevel } from './logging.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Leaves the route out of the request metrics: probes and scrapes would drown the traffic they measure. */
    disableMetrics?: boolean;
  }
}

const POOL_GAUGES: Array<[name: string, help: string, stat: keyof PoolStats]> = [
  ['db_pool_clients', 'database connections open in this process (SQLite: its one connection)', 'total'],
  ['db_pool_idle_clients', 'database connections open and free', 'idle'],
  ['db_pool_waiting_requests', 'queries and transactions waiting for a free database connection', 'waiting'],
];

/** What the live event streams report, read from the dispatcher at scrape time. */
export interface EventStreamStats {
  readonly open: number;
  lagSeconds(): number;
  bufferedBytes(): number;
}

/** Every unmatched URL counts under this one route label: a flood of 404s shows, and the series stay bounded. */
const UNMATCHED_ROUTE = '__unknown__';
/** Preflights and HEADs say nothing about the API's work. */
const UNCOUNTED_METHODS = new Set(['OPTIONS', 'HEAD']);

/**
 * One duration histogram per route pattern, method and status; its `_count` is the request count. Each
 * combination's series is looked up once and kept: labelling a sample on every request (sorting and joining
 * the label values) cost more than the rest of this hook. Routes, methods and statuses are finite, so is the map.
 */
function installRequestDurations(app: FastifyInstance, registry: Registry): void {
  const durations = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'request duration in seconds',
    labelNames: ['method', 'route', 'status_code'],
    registers: [registry],
  });
  const series = new Map<string, Histogram.Internal<'method' | 'route' | 'status_code'>>();

  // Fastify times every request from its arrival; onResponse runs once the answer has gone, whoever sent it.
  app.addHook('onResponse', (request, reply, done) => {
    const { config, url } = request.routeOptions;
    if (config.disableMetrics !== true && !UNCOUNTED_METHODS.has(request.method)) {
      const route = url ?? UNMATCHED_ROUTE;
      const key = `${request.method} ${reply.statusCode} ${route}`;
      let labelled = series.get(key);
      if (labelled === undefined) {
        labelled = durations.labels({ method: request.method, route, status_code: reply.statusCode });
        series.set(key, labelled);
      }
      labelled.observe(reply.elapsedTime / 1000);
    }
    done();
  });
}

/**
 * Prometheus metrics at GET /metrics: request durations, Node's process metrics (event-loop delay included),
 * the database connections with the queries waiting for one, and the live event streams. Each app has a registry
 * of its own, returned for the features that add theirs: prom-client's global one refuses a second app's metrics of
 * the same name.
 */
export function installMetrics(app: FastifyInstance, database: DatabaseHandle, streams: EventStreamStats): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  installRequestDurations(app, registry);

  for (const [name, help, stat] of POOL_GAUGES) {
    new Gauge({
      name,
      help,
      registers: [registry],
      // Read at scrape time, so the numbers are current and nothing runs between scrapes.
      collect() {
        this.set(database.poolStats()[stat]);
      },
    });
  }

  new Gauge({
    name: 'conduit_event_streams_open',
    help: 'live event streams (GET /api/events) open in this process',
    registers: [registry],
    collect() {
      this.set(streams.open);
    },
  });
  new Gauge({
    name: 'conduit_event_stream_buffered_bytes',
    help: 'bytes the live event streams of this process hold for clients that have not read them yet (EVENT_STREAMS_BUFFER_MB)',
    registers: [registry],
    collect() {
      this.set(streams.bufferedBytes());
    },
  });
  new Gauge({
    name: 'conduit_outbox_lag_seconds',
    help: 'how old the last event handed to the live streams was while more were waiting; 0 once caught up',
    registers: [registry],
    collect() {
      this.set(streams.lagSeconds());
    },
  });

  // Scrapes matter most while the instance is busy: never rate-limited or shed, and never answered from a cache.
  const route = {
    logLevel: machineRouteLogLevel(app.log.level),
    config: { disableMetrics: true, exemptFromLimits: true, cacheable: false },
  };
  app.get('/metrics', route, async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  return registry;
}
