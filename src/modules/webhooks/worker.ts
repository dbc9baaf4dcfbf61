import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { WebhookConfig } from '../../config.js';
import type { DatabaseHandle } from '../../db/index.js';
import { packageInfo } from '../../package-info.js';
import { envelope } from '../events/stream.js';
import { type ClaimedDelivery, claimDue, recordAttempt } from './queue.js';
import { sendWebhook } from './send.js';

/** How often an idle worker looks for due deliveries: the most a new event waits before it goes out. */
const POLL_MS = 250;
/**
 * Attempts in flight per process; each holds a socket and waits on someone else's server, which costs little while
 * it waits. With every owner held to OWNER_SHARE (queue.ts), seven owners' slow receivers still leave room for
 * everyone else, and past that another owner waits only for the next slot to free up.
 */
const IN_FLIGHT_MAX = 16;
/** After the database failed a claim: no point asking four times a second while it is down. */
const ERROR_PAUSE_MS = 5_000;
/** A claimed delivery comes due again this long after its attempt could last, should the process die meanwhile. */
const LEASE_MARGIN_MS = 60_000;
/** How long closing waits for attempts in flight; what is still out then is sent again once its lease runs out. */
const STOP_WAIT_MS = 2_000;
/** Endpoints owe us a status, not a body. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export interface DeliveryMetrics {
  attempts: Counter<'outcome'>;
  lag: Histogram;
}

/** What /metrics shows of the deliveries this process made: how each attempt ended, and how long events waited. */
export function deliveryMetrics(registry: Registry): DeliveryMetrics {
  return {
    attempts: new Counter({
      name: 'conduit_webhook_attempts_total',
      help: 'webhook delivery attempts by this process: delivered, retrying (failed, tried again later) or failed (given up)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    lag: new Histogram({
      name: 'conduit_webhook_delivery_lag_seconds',
      help: 'from the event to its successful delivery (retries included)',
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 30, 300, 3600, 86400],
      registers: [registry],
    }),
  };
}

export interface DeliveryWorker {
  stop(): Promise<void>;
}

/** A sleep that `ring` cuts short; a ring while awake makes the next sleep return at once, so none is lost. */
function alarm() {
  let rung = false;
  let ring = () => {
    rung = true;
  };
  return {
    ring: () => ring(),
    sleep: (ms: number) =>
      new Promise<void>((resolve) => {
        if (rung) {
          rung = false;
          resolve();
          return;
        }
        const wake = () => {
          clearTimeout(timer);
          ring = () => {
            rung = true;
          };
          resolve();
        };
        // Unref'd: a forgotten worker does not keep a process alive that has nothing else to do.
        const timer = setTimeout(wake, ms).unref();
        ring = wake;
      }),
  };
}

/**
 * Sends what the outbox queued, outside any request: claims due deliveries, sends them at most IN_FLIGHT_MAX at a
 * time, and records each outcome. A finished attempt wakes the loop at once, since it may have unblocked the
 * endpoint's next delivery.
 */
export function startDeliveryWorker(
  database: DatabaseHandle,
  config: WebhookConfig,
  log: FastifyBaseLogger,
  metrics: DeliveryMetrics,
): DeliveryWorker {
  const inFlight = new Set<Promise<void>>();
  const wakeUp = alarm();
  let stopping = false;
  const sendOptions = {
    timeoutMs: config.timeoutMs,
    maxResponseBytes: MAX_RESPONSE_BYTES,
    allowLoopback: config.allowLoopback,
    userAgent: `Conduit-Webhooks/${packageInfo.version}`,
  };

  const attempt = async (delivery: ClaimedDelivery) => {
    const startedAt = Date.now();
    const message = {
      // Standard Webhooks' message id, the same on every retry and replay: what receivers deduplicate by.
      id: `evt_${delivery.event.id}`,
      timestampSeconds: Math.floor(startedAt / 1000),
      body: envelope(delivery.event),
    };
    const result = await sendWebhook(delivery.url, message, delivery.secret, sendOptions);
    // A refusal is recorded as of when the attempt began: its end would show how long the lookup took, which tells an
    // internal name from a made-up one as surely as the error would.
    const outcome = await recordAttempt(database.writer, delivery, result, result.refused ? startedAt : Date.now(), config);
    metrics.attempts.labels({ outcome }).inc();
    if (outcome === 'delivered') metrics.lag.observe((Date.now() - delivery.event.createdAt) / 1000);
  };

  const start = (delivery: ClaimedDelivery) => {
    const running = attempt(delivery)
      .catch((error: unknown) => log.warn({ err: error, delivery: delivery.id }, 'could not record a webhook attempt; it is retried later'))
      .finally(() => {
        inFlight.delete(running);
        wakeUp.ring();
      });
    inFlight.add(running);
  };

  const leaseMs = config.timeoutMs + LEASE_MARGIN_MS;
  const loop = async () => {
    while (!stopping) {
      let pause = POLL_MS;
      try {
        const room = IN_FLIGHT_MAX - inFlight.size;
        if (room > 0) for (const delivery of await claimDue(database, Date.now(), room, leaseMs)) start(delivery);
      } catch (error) {
        log.warn({ err: error }, 'could not claim webhook deliveries; trying again shortly');
        pause = ERROR_PAUSE_MS;
      }
      await wakeUp.sleep(pause);
    }
  };
  const looping = loop();

  return {
    async stop() {
      stopping = true;
      wakeUp.ring();
      await looping;
      const waited = new Promise((resolve) => setTimeout(resolve, STOP_WAIT_MS).unref());
      await Promise.race([Promise.allSettled(inFlight), waited]);
    },
  };
}

/** Runs the worker while the app is up: from ready (listen, or the first inject) until close, before the database closes. */
export function installDeliveryWorker(app: FastifyInstance, database: DatabaseHandle, registry: Registry): void {
  const metrics = deliveryMetrics(registry);
  let worker: DeliveryWorker | undefined;
  app.addHook('onReady', async () => {
    worker = startDeliveryWorker(database, app.config.webhooks, app.log, metrics);
  });
  app.addHook('preClose', async () => {
    await worker?.stop();
  });
}
