import cors from '@fastify/cors';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { type DatabaseHandle, type Executor, openDatabase } from './db/index.js';
import { migrateOnStart } from './db/migrate.js';
import type { FairTurns } from './fair-turns.js';
import { apiIndexRoutes } from './modules/api-index/routes.js';
import { articlesRoutes } from './modules/articles/routes.js';
import { installPublicationScheduler } from './modules/articles/scheduler.js';
import { searchTurns } from './modules/articles/search-turns.js';
import { commentsRoutes } from './modules/comments/routes.js';
import { installEventDispatcher } from './modules/events/dispatcher.js';
import { scheduleRetention } from './modules/events/retention.js';
import { eventsRoutes } from './modules/events/routes.js';
import { exportRoutes } from './modules/export/routes.js';
import { feedsRoutes } from './modules/feeds/routes.js';
import { moderationRoutes } from './modules/moderation/routes.js';
import { notificationsRoutes } from './modules/notifications/routes.js';
import { profilesRoutes } from './modules/profiles/routes.js';
import { reportsRoutes } from './modules/reports/routes.js';
import { revisionsRoutes } from './modules/revisions/routes.js';
import { tagsRoutes } from './modules/tags/routes.js';
import { installAuth } from './modules/users/auth.js';
import { prepareDecoy } from './modules/users/passwords.js';
import { scheduleAccountPurge } from './modules/users/purge.js';
import { usersRoutes } from './modules/users/routes.js';
import { createTokenService, type TokenService } from './modules/users/tokens.js';
import { webhooksRoutes } from './modules/webhooks/routes.js';
import { installDeliveryWorker } from './modules/webhooks/worker.js';
import { installConditionalGet } from './plugins/conditional-get.js';
import { frameworkErrors, installErrorHandling } from './plugins/errors.js';
import { installHealthRoutes } from './plugins/health.js';
import { installIdempotency } from './plugins/idempotency.js';
import { installJsonBodyParser } from './plugins/json-body.js';
import { installRequestIdHeader, type LogDestination, loggerOptions, OneLinePerRequest, requestIdFor } from './plugins/logging.js';
import { installMetrics } from './plugins/metrics.js';
import { installOpenApi } from './plugins/openapi.js';
import { installOverloadProtection, timeoutOptions } from './plugins/overload.js';
import { installRateLimits, trustProxyOption } from './plugins/rate-limit.js';
import { installReplicaReads } from './plugins/replica-reads.js';
import { installSecurityHeaders } from './plugins/security-headers.js';
import { installShutdownDraining } from './plugins/shutdown.js';
import { installValidation } from './plugins/validation.js';
import { READ_METHODS } from './read-methods.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    db: Executor;
    /** Where searches run: see DatabaseHandle.searcher. */
    searcher: Executor;
    /** Searches take turns, fairly between clients: see articles/routes.ts. */
    searchTurns: FairTurns;
    tokens: TokenService;
  }
  interface FastifyRequest {
    /** The database as this request should use it: see `installRequestDatabase`. */
    db: Executor;
  }
}

export const BODY_LIMIT = 1024 * 1024;
/** Slugs run up to ~110 characters and usernames up to 64 in URLs; the router's default cap is 100. */
const MAX_PARAM_LENGTH = 1024;

export interface BuildOptions {
  /** An already open database (tests share one); otherwise the app opens and closes its own. */
  database?: DatabaseHandle;
  /** Where log lines go; stdout otherwise. */
  logStream?: LogDestination;
  /** False when whoever starts the app has migrated already: the cluster primary, once for all its workers. */
  migrate?: boolean;
  /** True in a WORKERS cluster's worker: the limits count in the primary, for every worker at once (without Redis). */
  countInPrimary?: boolean;
}

/**
 * A request that may write runs all its statements, the reads before its transaction included, on the connections
 * kept for writes (on PostgreSQL; one handle on SQLite), so that it does not wait behind the reads queued for a
 * connection each time it needs one.
 */
function installRequestDatabase(app: FastifyInstance, database: DatabaseHandle): void {
  app.decorateRequest('db', {
    getter(this: { method: string; reader: Executor | null }) {
      return READ_METHODS.has(this.method) ? (this.reader ?? database.db) : database.writer;
    },
  });
}

/** Builds the whole API as one Fastify instance; `server.ts` only starts it, tests inject into it. */
export async function buildApp(config: Config, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: loggerOptions(config, options.logStream),
    genReqId: requestIdFor,
    logController: new OneLinePerRequest(),
    bodyLimit: BODY_LIMIT,
    frameworkErrors,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH, ignoreTrailingSlash: true },
    trustProxy: trustProxyOption(config.trustProxy),
    ...timeoutOptions(config.timeouts),
  }).withTypeProvider<TypeBoxTypeProvider>();
  const database = options.database ?? openDatabase(config.database, app.log);

  try {
    if (options.migrate !== false) await migrateOnStart(config.database, database, (message) => app.log.info(message));
  } catch (error) {
    if (!options.database) await database.destroy();
    throw error;
  }
  if (!options.database) app.addHook('onClose', () => database.destroy());

  app.decorate('config', config);
  app.decorate('db', database.db);
  app.decorate('searcher', database.searcher);
  app.decorate('searchTurns', searchTurns(database.searchesAtOnce, config.searchesPerClient));
  installRequestDatabase(app, database);
  app.decorate('tokens', createTokenService(config.jwtSecret, config.jwtTtlSeconds));

  // First of the onRequest hooks: ids and timings cover the answers that later hooks cut short.
  installRequestIdHeader(app);
  installShutdownDraining(app);
  // Before any route is added (metrics and the probes come next): it hooks every GET route as it is declared.
  installConditionalGet(app, config.caching);
  const metrics = installMetrics(app, database, installEventDispatcher(app, database), config.metricsToken);
  installValidation(app);
  installErrorHandling(app);
  installJsonBodyParser(app);
  await app.register(cors, {
    origin: config.corsOrigins,
    methods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
    allowedHeaders: [
      'Authorization',
      'Content-Type',
      'X-Requested-With',
      'X-Request-Id',
      'Idempotency-Key',
      'If-Match',
      'If-None-Match',
      'If-Modified-Since',
      'Known-Device',
    ],
    // Past a limit, a browser client needs Retry-After to know when to come back; CORS hides it unless listed. A
    // frontend needs the ETag to send If-Match, and a login's Known-Device to send it back (modules/users/devices.ts).
    exposedHeaders: ['Allow', 'ETag', 'Known-Device', 'Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'],
    maxAge: 86400,
    // A bare OPTIONS (no Origin) is not a preflight; answer it plainly instead of with a framework error body.
    strictPreflight: false,
  });
  // After CORS, so that browsers can read these refusals too; before auth, so that they cost no database work.
  installSecurityHeaders(app);
  await installOverloadProtection(app, config.overload);
  const redis = await installRateLimits(app, config.rateLimits, options.countInPrimary === true);
  const replicaConfig = config.database.kind === 'postgres' ? config.database.replicas : undefined;
  installReplicaReads(app, database, redis, config.rateLimits.redisKeyPrefix, replicaConfig?.maxLagMs ?? 0);
  // After CORS, so that a 401 still carries the CORS headers a browser needs to read it.
  installAuth(app);
  installHealthRoutes(app, database);
  installIdempotency(app);
  scheduleRetention(app, config.retention);

  // Before the routes, which it documents as they are added.
  await installOpenApi(app);
  await app.register(apiIndexRoutes);
  // Outside /api: documents for feed readers, not the JSON API, though every limit and header above applies to them.
  await app.register(feedsRoutes);
  await app.register(
    async (api) => {
      await api.register(usersRoutes);
      await api.register(exportRoutes);
      await api.register(profilesRoutes);
      await api.register(articlesRoutes);
      await api.register(commentsRoutes);
      await api.register(revisionsRoutes);
      await api.register(tagsRoutes);
      await api.register(notificationsRoutes);
      await api.register(webhooksRoutes);
      await api.register(eventsRoutes);
      await api.register(moderationRoutes);
      await api.register(reportsRoutes);
    },
    { prefix: '/api' },
  );

  if (config.webhooks.deliver) installDeliveryWorker(app, database, metrics);
  if (config.lifecycle.publishScheduled) installPublicationScheduler(app, database.writer);
  // Every process: each account is purged by one of them, whichever comes first.
  scheduleAccountPurge(app, database.writer);

  await prepareDecoy();
  return app;
}
