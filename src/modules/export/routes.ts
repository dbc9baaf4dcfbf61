import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { rateLimited } from '../../errors.js';
import { errorResponses, toIso } from '../../schemas.js';
import { signedIn } from '../users/auth.js';
import { exportDocument } from './document.js';
import { claimExport } from './queries.js';
import { EXPORT_DESCRIPTION, ExportResponse } from './schemas.js';

/**
 * `attachment; filename="conduit-export-<username>-<date>.json"`. A username may be in any script, which a header
 * cannot carry as it is: then `filename` has `_` for each character outside ASCII, and `filename*` (RFC 6266) the
 * name itself, which browsers prefer.
 */
function attachment(username: string, now: number): string {
  const name = `conduit-export-${username}-${toIso(now).slice(0, 10)}.json`;
  const ascii = name.replace(/[^\w.-]/g, '_');
  return ascii === name
    ? `attachment; filename="${name}"`
    : `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * `GET /api/user/export`: a module of its own, beside the features it reads from, rather than in users/, which every
 * one of them already imports (for the signed-in user) and which would then import them all back.
 */
export const exportRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/user/export',
    {
      // Fastify answers HEAD by running the GET and draining the body: that would spend the account's export on a
      // whole document nobody receives. HEAD gets 405 instead.
      exposeHeadRoute: false,
      // Streamed: never hashed for an ETag nor kept by any cache (conditional-get.ts).
      config: { auth: 'required', cacheable: false },
      schema: {
        tags: ['users'],
        operationId: 'ExportCurrentUser',
        summary: 'Download everything your account holds, as one JSON document',
        description: EXPORT_DESCRIPTION,
        response: {
          200: {
            description: 'The export, written as it is read',
            headers: {
              'Content-Disposition': { type: 'string', description: '`attachment; filename="conduit-export-<username>-<date>.json"`' },
              'Cache-Control': { type: 'string', description: '`no-store`' },
            },
            content: { 'application/json': { schema: ExportResponse } },
          },
          ...errorResponses(401),
        },
      },
    },
    async (request, reply) => {
      const now = Date.now();
      const claim = await claimExport(request.db, signedIn(request).account.id, now);
      if (claim.retryAfterMs !== undefined) {
        reply.header('retry-after', Math.max(1, Math.ceil(claim.retryAfterMs / 1000)));
        throw rateLimited();
      }
      // Fastify pipes the stream into the response: a client that reads slowly pauses the reads (the stream asks
      // for the next piece only when what it holds has gone out), and one that goes away destroys the stream, which
      // ends the document's generator after the statement it is waiting for.
      const body = Readable.from(exportDocument(request.db, claim.id, claim.user, now), { objectMode: false });
      return (
        reply
          .type('application/json; charset=utf-8')
          .header('content-disposition', attachment(claim.user.username, now))
          // The schema documents the document; what is sent is the stream that writes it.
          .send(body as unknown as Static<typeof ExportResponse>)
      );
    },
  );
};
