import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { getTagsAnswerJson } from './queries.js';

export const tagsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/tags',
    {
      // No `config.auth`: nothing here depends on the viewer and the spec asks for no token, so one that is sent
      // is ignored rather than checked, and the busiest anonymous read does not pay for the auth hook.
      schema: {
        tags: ['tags'],
        operationId: 'GetTags',
        summary: 'Every tag in use, most used first, then by name',
        response: { 200: Type.Object({ tags: Type.Array(Type.String()) }) },
      },
    },
    async (request, reply) => {
      const json = await getTagsAnswerJson(request.db);
      // The schema's object, written by the database: Fastify sends a string with a JSON type as it is.
      return reply.type('application/json; charset=utf-8').send(json as unknown as { tags: string[] });
    },
  );
};
