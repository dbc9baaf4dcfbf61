import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  LogController,
  type LogLevel,
} from 'fastify';
import type { Config } from '../config.js';

/** Where log lines go instead of stdout. */
export interface LogDestination {
  write(line: string): void;
}

const REQUEST_ID_HEADER = 'x-request-id';

/** A caller's id is echoed in a header and written to every log line: no spaces, quotes or control characters, nothing huge. */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Keeps the id a proxy or another service sent, so one request can be followed across their logs and ours;
 * anything missing or malformed gets a fresh one.
 */
export function requestIdFor(request: IncomingMessage): string {
  const sent = request.headers[REQUEST_ID_HEADER];
  return typeof sent === 'string' && ACCEPTED_REQUEST_ID.test(sent) ? sent : randomUUID();
}

/** Added before any other onRequest hook, so that answers cut short there (a 401, a preflight) carry it too. */
export function installRequestIdHeader(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    done();
  });
}

/**
 * One line per request at `info`, written when the answer has gone, with what Fastify's two default lines
 * (incoming, completed) carry between them: every log write is a system call, and this halves them on the
 * busiest path. The arrival line is still there at `debug`, for following a request that never finishes.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (!this.isLogDisabled(request)) request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const line = { req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request completed');
  }
}

const AT_MOST_WARN: LogLevel[] = ['warn', 'error', 'fatal', 'silent'];

/**
 * For routes called every few seconds by machines (probes, scrapes): their request lines would drown the rest,
 * so they log at `warn` and above, or less when the app is quieter still.
 */
export const machineRouteLogLevel = (appLevel: string): LogLevel => AT_MOST_WARN.find((level) => level === appLevel) ?? 'warn';

const require = createRequire(import.meta.url);

/** Whether a package can be loaded from here: dev dependencies are absent after `npm install --omit=dev`. */
export function isInstalled(name: string): boolean {
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * JSON lines for log collectors; colours and aligned fields only for a developer watching a terminal, and only
 * where pino-pretty (a dev dependency) is installed: pino would otherwise fail to start its transport.
 * `stream` replaces stdout (tests read the lines back).
 */
export function loggerOptions(config: Config, stream?: LogDestination): FastifyServerOptions['logger'] {
  const pretty = stream === undefined && config.env === 'development' && process.stdout.isTTY === true && isInstalled('pino-pretty');
  return {
    level: config.logLevel,
    // Fastify's request serializer logs neither headers nor bodies; this guards any log call that passes them.
    redact: ['req.headers.authorization', 'req.headers.cookie', 'req.body.user.password'],
    ...(stream !== undefined && { stream }),
    ...(pretty && {
      transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
    }),
  };
}
