import type { Server } from 'node:http';
import underPressure from '@fastify/under-pressure';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import type { OverloadConfig, TimeoutConfig } from '../config.js';
import { HttpError } from '../errors.js';
import { RETRY_AFTER_SECONDS } from './errors.js';
import { isExemptFromLimits } from './rate-limit.js';

/**
 * Node checks the header and request timeouts of open connections on a timer (30 s by default); each second
 * keeps a slow client's connection from outliving its timeout by more than that.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/** Fastify's options bounding how long a client may hold a connection; `app.inject()` ignores them. */
export const timeoutOptions = (timeouts: TimeoutConfig) =>
  ({
    connectionTimeout: timeouts.connectionMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    requestTimeout: timeouts.requestMs,
    http: { headersTimeout: timeouts.headersMs, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
  }) satisfies FastifyHttpOptions<Server>;

/**
 * Past the event-loop delay or memory threshold, requests are refused with 503 and Retry-After at once, rather
 * than queued behind work the process cannot finish in time. Probes and /metrics are still answered: readiness
 * keeps meaning "the database answers", and shedding every overloaded instance from the load balancer at once
 * would turn a burst into an outage.
 */
export async function installOverloadProtection(app: FastifyInstance, overload: OverloadConfig): Promise<void> {
  if (overload.maxEventLoopDelayMs === 0 && overload.maxRssBytes === 0) return;
  await app.register(underPressure, {
    maxEventLoopDelay: overload.maxEventLoopDelayMs,
    maxRssBytes: overload.maxRssBytes,
    // Returning normally lets the request through.
    pressureHandler: async (request, reply) => {
      if (isExemptFromLimits(request)) return;
      reply.header('retry-after', RETRY_AFTER_SECONDS);
      throw new HttpError(503, { server: ['overloaded, retry later'] });
    },
  });
}
