import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { isForeignKeyViolation } from '../../db/constraints.js';
import { HttpError, notFound, unprocessable } from '../../errors.js';
import type { SecretFreeReplay } from '../../plugins/idempotency.js';
import { errorResponses } from '../../schemas.js';
import { signedIn } from '../users/auth.js';
import {
  createEndpoint,
  deleteEndpoint,
  enableEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  replayEvent,
  rotateSecret,
} from './queries.js';
import {
  DeliveryListResponse,
  DeliveryQuery,
  DeliveryResponse,
  NewWebhookBody,
  ReplayBody,
  WebhookListResponse,
  WebhookParams,
  WebhookResponse,
  WebhookWithSecretResponse,
} from './schemas.js';
import { checkTargetUrl, UnsafeTarget } from './target.js';

const TAGS = ['webhooks'];

export const webhooksRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const targetOptions = { allowLoopback: app.config.webhooks.allowLoopback };
  const me = (request: Parameters<typeof signedIn>[0]) => signedIn(request).account.id;

  /**
   * Create and rotate answers carry the signing secret. An Idempotency-Key keeps them without it, and a replay rotates
   * the secret again and shows the new one (the old one was never kept anywhere it could be read back), so the key
   * table never holds a live secret. A replay for an endpoint deleted since runs the request afresh.
   */
  const withFreshSecret: SecretFreeReplay = {
    stored(answer) {
      const { webhook } = JSON.parse(answer) as { webhook?: { secret?: string } };
      if (webhook?.secret === undefined) return answer;
      const { secret: _shownOnce, ...rest } = webhook;
      return JSON.stringify({ webhook: rest });
    },
    async replayed(request, stored) {
      const { webhook } = JSON.parse(stored) as { webhook?: { id: number } };
      if (webhook === undefined) return stored;
      try {
        return JSON.stringify(await rotateSecret(request.db, me(request), webhook.id));
      } catch (error) {
        if (error instanceof HttpError && error.statusCode === 404) return undefined;
        throw error;
      }
    },
  };

  app.post(
    '/webhooks',
    {
      config: { auth: 'required', secretFreeReplay: withFreshSecret },
      schema: {
        tags: TAGS,
        operationId: 'CreateWebhook',
        summary: 'Add an endpoint; the answer holds its signing secret, shown only this once',
        body: NewWebhookBody,
        response: { 201: WebhookWithSecretResponse, ...errorResponses(401, 422) },
      },
    },
    async (request, reply) => {
      const { url, events } = request.body.webhook;
      try {
        checkTargetUrl(url, targetOptions);
      } catch (error) {
        if (error instanceof UnsafeTarget) throw unprocessable('url', error.message);
        throw error;
      }
      return reply.code(201).send(await createEndpoint(request.db, me(request), url, events, Date.now()));
    },
  );

  app.get(
    '/webhooks',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'ListWebhooks',
        summary: 'Your endpoints, oldest first',
        response: { 200: WebhookListResponse, ...errorResponses(401) },
      },
    },
    (request) => listEndpoints(request.db, me(request)),
  );

  app.get(
    '/webhooks/:id',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'GetWebhook',
        summary: 'One of your endpoints',
        params: WebhookParams,
        response: { 200: WebhookResponse, ...errorResponses(401, 404, 422) },
      },
    },
    (request) => getEndpoint(request.db, me(request), request.params.id),
  );

  app.delete(
    '/webhooks/:id',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'DeleteWebhook',
        summary: 'Delete an endpoint, with its delivery log and whatever it still had queued',
        params: WebhookParams,
        response: { 204: { type: 'null', description: 'Deleted' }, ...errorResponses(401, 404, 422) },
      },
    },
    async (request, reply) => {
      await deleteEndpoint(request.db, me(request), request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/webhooks/:id/rotate-secret',
    {
      config: { auth: 'required', secretFreeReplay: withFreshSecret },
      schema: {
        tags: TAGS,
        operationId: 'RotateWebhookSecret',
        summary: 'Replace the signing secret; the answer holds the new one, shown only this once',
        params: WebhookParams,
        response: { 200: WebhookWithSecretResponse, ...errorResponses(401, 404, 422) },
      },
    },
    (request) => rotateSecret(request.db, me(request), request.params.id),
  );

  app.post(
    '/webhooks/:id/enable',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'EnableWebhook',
        summary: 'Resume deliveries to an endpoint disabled after failing for too long',
        params: WebhookParams,
        response: { 200: WebhookResponse, ...errorResponses(401, 404, 422) },
      },
    },
    (request) => enableEndpoint(request.db, me(request), request.params.id),
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'ListWebhookDeliveries',
        summary: "An endpoint's deliveries, newest first, a page at a time",
        params: WebhookParams,
        querystring: DeliveryQuery,
        response: { 200: DeliveryListResponse, ...errorResponses(401, 404, 422) },
      },
    },
    (request) => listDeliveries(request.db, me(request), request.params.id, request.query.limit, request.query.cursor),
  );

  app.post(
    '/webhooks/:id/replay',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'ReplayWebhookEvent',
        summary: 'Send one of your past events to this endpoint again',
        params: WebhookParams,
        body: ReplayBody,
        response: { 202: DeliveryResponse, ...errorResponses(401, 404, 422) },
      },
    },
    async (request, reply) => {
      const owner = me(request);
      try {
        const answer = await replayEvent(request.db, owner, request.params.id, Number(request.body.eventId), Date.now());
        return reply.code(202).send(answer);
      } catch (error) {
        // The endpoint or the event was deleted between the checks and the insert.
        if (isForeignKeyViolation(error)) throw notFound('webhook');
        throw error;
      }
    },
  );
};
