import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { errorResponses } from '../../schemas.js';
import { sendAnswer } from '../../shared-answers.js';
import { getTagsAnswer } from './queries.js';

export const tagsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/tags',
    {
      // Nothing here depends on the viewer, but a token that is sent is still checked, as on every route.
      config: { auth: 'optional' },
      schema: {
        tags: ['tags'],
        operationId: 'GetTags',
        summary: 'Every tag in use, most used first, then by name',
        response: { 200: Type.Object({ tags: Type.Array(Type.String()) }), ...errorResponses(401) },
      },
    },
    async (_request, reply) => sendAnswer(reply, await getTagsAnswer(app.db)),
  );
};
