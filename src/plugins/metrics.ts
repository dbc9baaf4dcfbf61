import { createHash, timingSafeEqual } from 'node:crypto';
import { BlockList, isIPv4 } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { DatabaseHandle, PoolStats } from '../db/index.js';
import { HttpError, unauthorized } from '../errors.js';
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

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Headers a proxy adds when it relays a request: such a request came from somewhere else, whatever its socket says. */
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/**
 * The socket's own address, not `request.ip`: with TRUST_PROXY that is read from headers. A proxy on this host
 * connects from loopback too, so a request carrying what proxies add is never taken for a local one.
 */
function isLocalRequest(request: FastifyRequest): boolean {
  const address = request.socket.remoteAddress?.replace(/^::ffff:(?=\d+\.)/, '');
  if (address === undefined || !loopback.check(address, isIPv4(address) ? 'ipv4' : 'ipv6')) return false;
  return FORWARDING_HEADERS.every((name) => request.headers[name] === undefined);
}

/** Digests of equal length, so that the comparison takes the same time whatever the caller sent. */
const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Who may read /metrics, which tells how busy each route is and how much memory the process holds: with a token,
 * whoever presents it as a bearer (from anywhere, loopback included, since a proxy on this host is loopback too);
 * without one, only clients on this host.
 */
function metricsGuard(token: string | null): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
  if (token === null) {
    return async (request) => {
      if (!isLocalRequest(request)) {
        throw new HttpError(403, { metrics: ['only answered to this host; set METRICS_TOKEN to scrape from elsewhere'] });
      }
    };
  }
  const expected = digest(token);
  return async (request, reply) => {
    const { authorization } = request.headers;
    const presented = /^Bearer +(\S+) *$/i.exec(authorization ?? '')?.[1];
    if (presented === undefined || !timingSafeEqual(digest(presented), expected)) {
      reply.header('www-authenticate', 'Bearer realm="metrics"');
      throw unauthorized(authorization === undefined ? 'is missing' : 'is invalid');
    }
  };
}

/**
 * Prometheus metrics at GET /metrics: request durations, Node's process metrics (event-loop delay included),
 * the database connections with the queries waiting for one, and the live event streams, for the clients
 * `metricsGuard` admits. Each app has a registry of its own, returned for the features that add theirs: prom-client's
 * global one refuses a second app's metrics of the same name.
 */
export function installMetrics(app: FastifyInstance, database: DatabaseHandle, streams: EventStreamStats, token: string | null): Registry {
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

  const { replicas } = database;
  if (replicas !== null) {
    new Gauge({
      name: 'db_replica_up',
      help: 'whether the replica takes reads now (1): it answers, and lags less than DATABASE_REPLICA_MAX_LAG',
      labelNames: ['replica'],
      registers: [registry],
      collect() {
        for (const status of replicas.statuses()) this.set({ replica: status.name }, status.state === 'up' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'db_replica_lag_seconds',
      help: 'how far the replica was behind the primary at the last poll; absent while it does not answer',
      labelNames: ['replica'],
      registers: [registry],
      collect() {
        this.reset();
        for (const status of replicas.statuses()) if (status.lagMs !== null) this.set({ replica: status.name }, status.lagMs / 1000);
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
    onRequest: metricsGuard(token),
  };
  app.get('/metrics', route, async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  return registry;
}
