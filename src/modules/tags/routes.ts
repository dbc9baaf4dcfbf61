import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { listTags } from './queries.js';

export const tagsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/tags',
    {
      schema: {
        tags: ['tags'],
        summary: 'Every tag in use, most used first, then by name',
        response: { 200: Type.Object({ tags: Type.Array(Type.String()) }) },
      },
    },
    async () => ({ tags: await listTags(app.db) }),
  );
};
