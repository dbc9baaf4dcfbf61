import type { Server } from 'node:http';
import underPressure from '@fastify/under-pressure';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import type { OverloadConfig, TimeoutConfig } from '../config.js';
import { HttpError } from '../errors.js';
import { RETRY_AFTER_SECONDS } from './errors.js';
import { clientKey, isExemptFromLimits } from './rate-limit.js';

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

/** Client addresses counted at once; past it, a new address goes uncounted (and is never the busiest). */
const MAX_COUNTED_CLIENTS = 10_000;

/**
 * Requests per client address over the last one to two seconds: two one-second windows, the older dropped each
 * second. Under pressure, a client that sent at least half as many as the busiest one is shed and the others are
 * served, so one client flooding the server is refused alone while everyone else keeps being answered; when all
 * send alike, all are shed.
 */
class ClientLoad {
  private current = new Map<string, number>();
  private previous = new Map<string, number>();
  private busiest = 0;

  rotate(): void {
    this.previous = this.current;
    this.current = new Map();
    this.busiest = Math.max(0, ...this.previous.values());
  }

  count(client: string): void {
    const sent = this.current.get(client);
    if (sent === undefined && this.current.size >= MAX_COUNTED_CLIENTS) return;
    this.current.set(client, (sent ?? 0) + 1);
    this.busiest = Math.max(this.busiest, this.recent(client));
  }

  isAmongBusiest(client: string): boolean {
    return this.recent(client) * 2 >= this.busiest;
  }

  private recent(client: string): number {
    return (this.current.get(client) ?? 0) + (this.previous.get(client) ?? 0);
  }
}

/**
 * Past the event-loop delay or memory threshold, requests from the busiest clients are refused with 503 and
 * Retry-After at once, rather than queued behind work the process cannot finish in time. Probes and /metrics are
 * still answered: readiness keeps meaning "the database answers", and shedding every overloaded instance from the
 * load balancer at once would turn a burst into an outage.
 */
export async function installOverloadProtection(app: FastifyInstance, overload: OverloadConfig): Promise<void> {
  if (overload.maxEventLoopDelayMs === 0 && overload.maxRssBytes === 0) return;
  const load = new ClientLoad();
  const timer = setInterval(() => load.rotate(), 1000).unref();
  app.addHook('onClose', async () => clearInterval(timer));
  app.addHook('onRequest', (request, _reply, done) => {
    if (!isExemptFromLimits(request)) load.count(clientKey(request));
    done();
  });
  await app.register(underPressure, {
    maxEventLoopDelay: overload.maxEventLoopDelayMs,
    maxRssBytes: overload.maxRssBytes,
    // Returning normally lets the request through.
    pressureHandler: async (request, reply) => {
      if (isExemptFromLimits(request) || !load.isAmongBusiest(clientKey(request))) return;
      reply.header('retry-after', RETRY_AFTER_SECONDS);
      throw new HttpError(503, { server: ['overloaded, retry later'] });
    },
  });
}
