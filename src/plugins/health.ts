import type { FastifyInstance } from 'fastify';
import type { DatabaseHandle } from '../db/index.js';
import { sendUnavailable } from './errors.js';
import { machineRouteLogLevel } from './logging.js';

/** Ample for a `select 1` that waits for a busy pool's next free client; short enough to answer before the next probe. */
export const READINESS_TIMEOUT_MS = 2000;

export const LIVENESS_PATH = '/health/live';
export const READINESS_PATH = '/health/ready';

function withTimeout(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the database did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/**
 * Liveness says only that the process still serves HTTP, so a database outage never gets every instance restarted;
 * readiness says whether this instance can do useful work, so a load balancer routes around it until it can.
 */
export function installHealthRoutes(app: FastifyInstance, database: DatabaseHandle): void {
  // Probes that arrive while a ping is outstanding share it, so a hung database gets one attempt per timeout period
  // rather than one per probe; a timed-out attempt is not shared further, so the next probe can see a recovery.
  let pending: Promise<void> | null = null;
  // Probes run every few seconds on every instance: kept out of the request metrics and the limits, and logged only
  // when they fail. A cached "ok" would hide an outage: never stored.
  const probeRoute = {
    logLevel: machineRouteLogLevel(app.log.level),
    config: { disableMetrics: true, exemptFromLimits: true, cacheable: false },
  };

  app.get(LIVENESS_PATH, probeRoute, async () => ({ status: 'ok' }));

  app.get(READINESS_PATH, probeRoute, async (request, reply) => {
    pending ??= database.ping();
    const attempt = pending;
    try {
      await withTimeout(attempt, READINESS_TIMEOUT_MS);
    } catch (error) {
      request.log.warn({ err: error }, 'not ready: the database is unavailable');
      return sendUnavailable(reply);
    } finally {
      if (pending === attempt) pending = null;
    }
    // Replicas never make an instance unready: the primary takes their reads while they are away.
    return database.replicas === null ? { status: 'ok' } : { status: 'ok', replicas: database.replicas.statuses() };
  });
}
