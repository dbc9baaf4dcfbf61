import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { decodeIdCursor } from '../../id-cursor.js';
import { errorResponses, IdPageQuery } from '../../schemas.js';
import { screeningOf } from '../profiles/blocks.js';
import { signedIn } from '../users/auth.js';
import { listNotifications, markRead } from './queries.js';
import { MarkReadBody, NotificationListResponse, UnreadCountResponse } from './schemas.js';

export const notificationsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/notifications',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['notifications'],
        operationId: 'GetNotifications',
        summary: 'Your notifications, newest first',
        querystring: IdPageQuery,
        response: { 200: NotificationListResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      const { limit, cursor } = request.query;
      const before = cursor === undefined ? undefined : decodeIdCursor(cursor, 'bigint');
      return listNotifications(request.db, signedIn(request).account.id, screeningOf(request), { limit, before });
    },
  );

  app.post(
    '/notifications/read',
    {
      // A suspended account still reads its notifications, the decisions about it among them.
      config: { auth: 'required', whileSuspended: true },
      // A POST with no body at all marks everything read, as `{}` does: every field of the body is optional.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        tags: ['notifications'],
        operationId: 'MarkNotificationsRead',
        summary: 'Mark your notifications read up to one of them; the mark never moves back',
        body: MarkReadBody,
        response: { 200: UnreadCountResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => markRead(request.db, signedIn(request).account.id, screeningOf(request), request.body.upTo),
  );
};
