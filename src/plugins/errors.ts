import type { IncomingMessage } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { uniqueViolation } from '../db/constraints.js';
import { isQueryCanceled, isUnavailable } from '../db/unavailable.js';
import { alreadyTaken, HttpError, LOOKALIKE_USERNAME } from '../errors.js';
import { validationErrors } from './validation.js';

type ErrorBody = { errors: Record<string, string[]> };

const INTERNAL: ErrorBody = { errors: { server: ['internal error'] } };
const DATABASE_UNAVAILABLE: ErrorBody = { errors: { database: ['unavailable'] } };
/** Long enough for a database restart or failover to get somewhere, short enough that clients come back soon after. */
export const RETRY_AFTER_SECONDS = 5;

/** Fastify's own request errors, given the contract's bodies instead of the framework defaults. */
const FRAMEWORK_ERRORS: Record<string, [number, ErrorBody]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: [400, { errors: { body: ['is not valid JSON'] } }],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, { errors: { body: ['is too large'] } }],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, { errors: { body: ['must be sent as application/json'] } }],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, { errors: { body: ['does not match its Content-Length'] } }],
  FST_ERR_BAD_URL: [400, { errors: { url: ['is malformed'] } }],
  FST_ERR_MAX_PARAM_LENGTH: [414, { errors: { url: ['is too long'] } }],
};

function toResponse(error: FastifyError | HttpError): [number, ErrorBody] | null {
  if (error instanceof HttpError) return [error.statusCode, { errors: error.errors }];
  if ('validation' in error && Array.isArray(error.validation)) {
    return [422, { errors: validationErrors(error.validation as never, error.validationContext ?? 'body') }];
  }
  // Unique keys decide whether a username or email is free; their violations are the 409s.
  const taken = uniqueViolation(error);
  if (taken === 'username' || taken === 'email') return [409, { errors: alreadyTaken(taken).errors }];
  if (taken === 'lookalike') return [409, { errors: { username: [LOOKALIKE_USERNAME] } }];
  const known = error.code ? FRAMEWORK_ERRORS[error.code] : undefined;
  if (known) return known;
  // Other client errors raised by Fastify or its plugins (e.g. an aborted upload) keep their status.
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) return [status, { errors: { request: ['is invalid'] } }];
  return null;
}

export function sendError(reply: FastifyReply, status: number, body: ErrorBody): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/** The database cannot take work right now, for readiness probes and requests alike: the client may retry later. */
export function sendUnavailable(reply: FastifyReply): FastifyReply {
  return sendError(reply.header('retry-after', RETRY_AFTER_SECONDS), 503, DATABASE_UNAVAILABLE);
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    // The request's own stream failed: the client closed the connection before its whole body arrived. Node calls
    // that ECONNRESET, which the next check would take for a lost database connection. The 400 Fastify marks it
    // with is answered below, to no one.
    if (error === request.raw.errored) {
      request.log.info('the client closed the connection before sending its whole request');
    } else if (isUnavailable(error)) {
      request.log.warn({ err: error }, 'the database is unavailable');
      return sendUnavailable(reply);
    } else if (isQueryCanceled(error)) {
      // Past DATABASE_STATEMENT_TIMEOUT the statement may be one that goes wrong or one that waited behind a lock or
      // a busy database; the latter fares better later, and the client cannot tell them apart any more than we can.
      request.log.warn({ err: error }, 'the database cancelled a statement: DATABASE_STATEMENT_TIMEOUT, or an operator');
      return sendUnavailable(reply);
    }
    const response = toResponse(error);
    if (response) return sendError(reply, ...response);
    // Details stay in the log; the client learns only that it was our fault.
    request.log.error({ err: error }, 'unhandled error');
    return sendError(reply, 500, INTERNAL);
  });

  // The client's URL is back as soon as the request enters the lifecycle, for the hooks, the handler and the logs.
  app.addHook('onRequest', (request, _reply, done) => {
    const refusal = refusedByRouter.get(request.raw);
    if (refusal) request.raw.url = refusal.url;
    done();
  });
  app.setNotFoundHandler((request, reply) => {
    const refusal = refusedByRouter.get(request.raw);
    if (refusal) throw refusal.error;
    const allowed = app.supportedMethods.filter((method) => app.findRoute({ method, url: request.url }) !== null);
    // CORS answers OPTIONS on every path, so that match alone does not make a path known.
    if (allowed.some((method) => method !== 'OPTIONS')) {
      reply.header('allow', allowed.join(', '));
      return sendError(reply, 405, { errors: { method: [`${request.method} is not allowed on this path`] } });
    }
    return sendError(reply, 404, { errors: { route: ['not found'] } });
  });
}

/** Requests the router could not take (a URL that cannot be decoded, a segment over the length cap): why, and their URL. */
const refusedByRouter = new WeakMap<IncomingMessage, { error: FastifyError; url: string }>();
/** Matches no route, so it reaches the not-found handler; no client can send it (the HTTP parser refuses a NUL). */
const UNROUTABLE_URL = '/\u0000';

/**
 * Errors raised before routing reach this hook, outside the lifecycle: none of the hooks every other answer passes
 * through (request id, CORS, security headers, limits, metrics, the request log line) would run. So the request is
 * routed again, on a URL that takes it through all of them to the not-found handler, which answers with the error.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  refusedByRouter.set(request.raw, { error, url: request.url });
  request.raw.url = UNROUTABLE_URL;
  request.server.routing(request.raw, reply.raw);
}
