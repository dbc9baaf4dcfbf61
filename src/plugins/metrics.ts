import type { FastifyInstance } from 'fastify';
import fastifyMetricsModule from 'fastify-metrics';
import { Gauge, Registry } from 'prom-client';
import type { DatabaseHandle, PoolStats } from '../db/index.js';
import { machineRouteLogLevel } from './logging.js';

const POOL_GAUGES: Array<[name: string, help: string, stat: keyof PoolStats]> = [
  ['db_pool_clients', 'PostgreSQL connections open in this process', 'total'],
  ['db_pool_idle_clients', 'PostgreSQL connections open and free', 'idle'],
  ['db_pool_waiting_requests', 'queries waiting for a free PostgreSQL connection', 'waiting'],
];

/**
 * Prometheus metrics at GET /metrics: one duration histogram per route pattern, method and status (its `_count`
 * is the request count), Node's process metrics (event-loop delay included) and, on PostgreSQL, the pool.
 * Each app has a registry of its own: prom-client's global one refuses a second app's metrics of the same name.
 */
export async function installMetrics(app: FastifyInstance, database: DatabaseHandle): Promise<void> {
  const registry = new Registry();

  // A CommonJS module compiled from ES modules: from ESM, its plugin is the `default` property of the import.
  await app.register(fastifyMetricsModule.default, {
    // Served below, from this app's registry; the plugin's own endpoint would merge in the global one.
    endpoint: null,
    defaultMetrics: { enabled: true, register: registry },
    routeMetrics: {
      // Unmatched URLs are counted too, all under one `__unknown__` route: a flood of 404s shows, cardinality stays bounded.
      registeredRoutesOnly: false,
      enabled: { histogram: true, summary: false },
      // The plugin builds its summary even when disabled; no registers keeps it out of every registry, the global one included.
      overrides: { histogram: { registers: [registry] }, summary: { registers: [] } },
    },
  });

  if (database.poolStats() !== null) {
    for (const [name, help, stat] of POOL_GAUGES) {
      new Gauge({
        name,
        help,
        registers: [registry],
        // Read at scrape time, so the numbers are current and nothing runs between scrapes.
        collect() {
          const stats = database.poolStats();
          if (stats !== null) this.set(stats[stat]);
        },
      });
    }
  }

  // Scrapes matter most while the instance is busy: never rate-limited or shed.
  const route = { logLevel: machineRouteLogLevel(app.log.level), config: { disableMetrics: true, exemptFromLimits: true } };
  app.get('/metrics', route, async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
}
