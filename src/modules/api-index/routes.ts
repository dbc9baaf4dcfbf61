import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { packageInfo } from '../../package-info.js';
import { LIVENESS_PATH, READINESS_PATH } from '../../plugins/health.js';
import { DOCS_PATH, OPENAPI_PATH } from '../../plugins/openapi.js';

const ApiIndex = Type.Object({
  name: Type.String(),
  version: Type.String(),
  links: Type.Object({
    docs: Type.String({ description: 'The interactive API reference' }),
    openapi: Type.String({ description: 'The OpenAPI 3.1 document' }),
    liveness: Type.String({ description: 'Answers 200 while the process serves HTTP' }),
    readiness: Type.String({ description: 'Answers 200 while the database answers too' }),
  }),
});

const INDEX = {
  name: packageInfo.name,
  version: packageInfo.version,
  links: { docs: DOCS_PATH, openapi: OPENAPI_PATH, liveness: LIVENESS_PATH, readiness: READINESS_PATH },
};

/** What someone who only knows the address finds there: where the docs and the probes are, and which version runs. */
export const apiIndexRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const schema = {
    operationId: 'GetApiIndex',
    tags: ['index'],
    summary: 'Links to the docs, the OpenAPI document and the health probes',
    response: { 200: ApiIndex },
  };
  // Written with the trailing slash because the document's server is /api and @fastify/swagger cuts that off each
  // path: `/api` would be left as an empty path, `/api/` reads as `/`. The router serves both with or without it.
  app.get('/api/', { schema }, async () => INDEX);
  // The same answer; the document's paths are all relative to /api, so it cannot name this one.
  app.get('/', { schema: { ...schema, hide: true } }, async () => INDEX);
};
