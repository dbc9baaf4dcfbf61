import { STATUS_CODES } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyContextConfig, FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { refusesLeaving } from '../modules/users/auth.js';
import { packageInfo } from '../package-info.js';
import { errorResponses } from '../schemas.js';
import { takesIdempotencyKey } from './idempotency.js';

export const OPENAPI_PATH = '/api/openapi.json';
export const DOCS_PATH = '/docs';

/**
 * The page runs only the scripts and styles served with it and talks only to this server. It replaces the policy
 * every JSON answer carries (security-headers.ts), under which the page could not run at all.
 */
const DOCS_CSP = {
  'default-src': "'self'",
  'img-src': "'self' data:",
  // Swagger UI writes inline styles as it renders; scripts stay limited to the served files.
  'style-src': "'self' 'unsafe-inline'",
  'object-src': "'none'",
  'base-uri': "'none'",
  'form-action': "'self'",
  'frame-ancestors': "'none'",
};

/**
 * The modes a route's `config.auth` declares (the users module's auth hook enforces them), read from Fastify's
 * route config rather than imported, so that this plugin does not depend on a domain module.
 */
type AuthMode = NonNullable<FastifyContextConfig['auth']>;

/** Routes without `config.auth` (registration, login) take no token; an empty list says so explicitly. */
const PUBLIC: Record<string, string[]>[] = [];
const SECURITY: Record<AuthMode, Record<string, string[]>[]> = {
  required: [{ Token: [] }],
  // The empty requirement is how OpenAPI says "or no token at all".
  optional: [{}, { Token: [] }],
};

/** Fastify reads a body for these methods only, so only they meet the body parser's refusals. */
const BODY_METHODS = new Set(['POST', 'PUT', 'DELETE']);

/**
 * The error statuses a route can answer with that come from the plugins every request passes through rather than
 * from its handler, so its own schema does not list them: a URL that cannot be decoded (400), the general rate
 * limit (429), an unexpected failure (500), overload or an unavailable database (503); a token that is missing or
 * bad (401, auth.ts), or a write by an account that is leaving (403, auth.ts); a body that is not JSON, too large, of another media type or encoding, or with NUL characters
 * or too deep (400, 413, 415, 422, errors.ts and json-body.ts); an idempotency key that is blank, reused or still
 * in use (422, 409, idempotency.ts); a query, path or body that fails its schema (422).
 */
function sharedErrorStatuses(route: RouteOptions, schema: FastifySchema): number[] {
  const methods = [route.method].flat();
  const statuses = new Set([400, 429, 500, 503]);
  const add = (...more: number[]) => {
    for (const status of more) statuses.add(status);
  };
  if (route.config?.auth !== undefined) add(401);
  if (refusesLeaving(route)) add(403);
  if (methods.some((method) => BODY_METHODS.has(method))) add(400, 413, 415, 422);
  if (takesIdempotencyKey(route.method)) add(409, 422);
  if (schema.params !== undefined || schema.querystring !== undefined || schema.body !== undefined) add(422);
  return [...statuses];
}

type SchemaObject = Record<string, unknown>;

const ETAG = {
  type: 'string',
  description: 'A strong validator of this answer: send it back in If-None-Match (or in If-Match to change it)',
};
const CACHE_CONTROL = {
  type: 'string',
  description:
    '`private, no-cache` when the answer depends on the token; otherwise `public, max-age=0, s-maxage=N`: browsers ' +
    'revalidate every time, shared caches may keep it N seconds (CDNs read `CDN-Cache-Control`, which adds ' +
    '`stale-while-revalidate`)',
};
const VARY = { type: 'string', description: 'Includes `Authorization`: the answer differs with the token' };

/**
 * What conditional-get.ts adds to every GET answered with a document (JSON, or a feed's XML): the headers of a 200, the 304, If-None-Match, and
 * If-Modified-Since where the route documents a Last-Modified. The writes that take If-Match document their 412
 * themselves and get the ETag of the new version here.
 */
function withConditionalParts(route: RouteOptions, schema: FastifySchema): FastifySchema {
  const responses = schema.response as Record<string, SchemaObject> | undefined;
  const ok = responses?.[200];
  // A stream (the event stream) is never complete, so it has no ETag to compare.
  if (ok === undefined || 'text/event-stream' in ((ok.content as SchemaObject | undefined) ?? {})) return schema;
  const requestHeaders = (schema.headers ?? { type: 'object', properties: {} }) as SchemaObject & { properties: SchemaObject };
  const okHeaders = (ok.headers ?? {}) as SchemaObject;
  if ('if-match' in requestHeaders.properties) {
    return { ...schema, response: { ...responses, 200: { ...ok, headers: { ...okHeaders, ETag: ETAG } } } };
  }
  if (![route.method].flat().includes('GET') || route.config?.cacheable === false) return schema;
  const validators = { ETag: ETAG, 'Cache-Control': CACHE_CONTROL, ...(route.config?.auth !== undefined && { Vary: VARY }) };
  const conditions: SchemaObject = {
    'if-none-match': {
      type: 'string',
      description: 'ETags of the copies the client has (or `*`): when one is current, the answer is 304 without a body',
    },
    ...('Last-Modified' in okHeaders && {
      'if-modified-since': {
        type: 'string',
        description: 'Without If-None-Match: 304 when nothing changed since this date (the Last-Modified of the copy)',
      },
    }),
  };
  return {
    ...schema,
    headers: { ...requestHeaders, properties: { ...requestHeaders.properties, ...conditions } },
    response: {
      ...responses,
      200: { ...ok, headers: { ...okHeaders, ...validators } },
      304: { type: 'null', description: 'The copy the client has is current', headers: validators },
    },
  };
}

/**
 * Error responses share one body schema and so one description; the reason phrase says which case each
 * status is, where the schema's own description would repeat the same sentence on every line.
 */
function describeResponses(response: FastifySchema['response']) {
  if (typeof response !== 'object' || response === null) return response;
  return Object.fromEntries(
    Object.entries(response).map(([status, schema]) => [status, { 'x-response-description': STATUS_CODES[status], ...(schema as object) }]),
  );
}

/**
 * The OpenAPI 3.1 document built from the route schemas, at `GET /api/openapi.json`, and Swagger UI at `/docs`
 * serving its assets from the npm package. Register before the routes: only routes added later are seen.
 */
export async function installOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Conduit API',
        version: packageInfo.version,
        // package.json's license is an SPDX expression, which is what `identifier` takes.
        license: { name: packageInfo.license, identifier: packageInfo.license },
        description:
          'The RealWorld ("Conduit") API, spec 2.0.0. Errors are `{"errors": {"field": ["message"]}}`. ' +
          'Sign in with POST /users/login, then **Authorize** with `Token <token>`.\n\n' +
          '**Versioning.** These paths, without a version in them, are version 1 and stay compatible: changes only add ' +
          '(fields in answers, optional parameters, endpoints, event types), and clients ignore what they do not know. A ' +
          'change that would break a client gets a new path prefix, with version 1 kept beside it. Events carry the ' +
          'schema version of their `data` in `version`.',
      },
      // Relative, so "Try it out" calls whichever host and port served the page. @fastify/swagger strips this
      // base from the route URLs, so paths read as the RealWorld spec writes them (`/tags`, sent to `/api/tags`).
      servers: [{ url: '/api', description: 'This server' }],
      tags: [
        { name: 'users', description: 'Registration, login and the current user' },
        { name: 'profiles', description: 'Public profiles and follows' },
        { name: 'articles', description: 'Articles, lists and the personal feed' },
        { name: 'favorites', description: 'Favoriting articles' },
        { name: 'comments', description: 'Comments on articles' },
        { name: 'revisions', description: "The kept versions of an article's content, for its author" },
        { name: 'tags', description: 'Tags in use' },
        { name: 'notifications', description: 'What others did to you or your articles, and how far you have read' },
        { name: 'webhooks', description: 'Your endpoints that receive signed events, and their delivery log' },
        { name: 'events', description: 'What happens, live: new articles and comments, and your notifications' },
        {
          name: 'moderation',
          description: "Reports, the moderators' queue, hiding, suspension, roles, the audit log, and the decisions about you",
        },
        { name: 'index', description: 'Where this reference, the OpenAPI document and the health probes are' },
        { name: 'feeds', description: 'RSS, Atom and JSON Feed documents of the newest articles, for feed readers (outside /api)' },
      ],
      components: {
        securitySchemes: {
          Token: {
            type: 'apiKey',
            in: 'header',
            name: 'Authorization',
            description: 'The JWT from login or registration, sent as `Token <jwt>` (`Bearer <jwt>` works too).',
          },
        },
      },
    },
    // Security follows from each route's `config.auth`, the same setting the auth hook enforces.
    transform: ({ schema, url, route }) => {
      const auth = route.config?.auth;
      const conditional = withConditionalParts(route, schema);
      const response = { ...errorResponses(...sharedErrorStatuses(route, schema)), ...(conditional.response as object) };
      return {
        url,
        schema: {
          ...conditional,
          security: auth === undefined ? PUBLIC : SECURITY[auth],
          response: describeResponses(response),
        },
      };
    },
  });

  await app.register(swaggerUi, {
    routePrefix: DOCS_PATH,
    staticCSP: DOCS_CSP,
    theme: { title: 'Conduit API reference' },
    uiConfig: {
      docExpansion: 'list',
      // A token entered with "Authorize" survives reloading the page.
      persistAuthorization: true,
      displayRequestDuration: true,
    },
  });

  app.get(OPENAPI_PATH, { schema: { hide: true } }, () => app.swagger());
}
