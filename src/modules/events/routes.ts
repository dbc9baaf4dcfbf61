import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Static, Type } from 'typebox';
import { HttpError, notFound, rateLimited } from '../../errors.js';
import { RETRY_AFTER_SECONDS } from '../../plugins/errors.js';
import type { GiveBack } from '../../plugins/held-places.js';
import { clientKey } from '../../plugins/rate-limit.js';
import { errorResponses } from '../../schemas.js';
import { screeningOf } from '../profiles/blocks.js';
import { findProfile } from '../profiles/queries.js';
import { viewerId } from '../users/auth.js';
import type { EventType } from './catalogue.js';
import { EventStream, type StreamFilter } from './event-stream.js';
import { EVENT_STREAM_DESCRIPTION, EventsHeaders, EventsQuery } from './schemas.js';
import { positionAfterEvent, type StreamPosition } from './stream.js';

type EventsRequest = FastifyRequest<{ Querystring: Static<typeof EventsQuery> }>;

async function filterOf(request: EventsRequest): Promise<StreamFilter> {
  const { tag, author, types } = request.query;
  let authorId: number | null = null;
  if (author) {
    // By id, not by name: the stream follows the author through a change of username, and matches deleted articles too.
    const profile = await findProfile(request.db, author, null);
    if (profile === undefined) throw notFound('profile');
    authorId = profile.id;
  }
  const screened = screeningOf(request)?.authors ?? [];
  return {
    viewerId: viewerId(request),
    types: types ? new Set(types.split(',') as EventType[]) : null,
    tag: tag || null,
    authorId,
    screened: new Set(screened),
  };
}

const nothingToGiveBack: GiveBack = () => {};

/**
 * `GET /api/events`: the outbox as Server-Sent Events, live from this process's dispatcher. Streams are limited per
 * client address, counted where the rate limits count (so once for every worker of a cluster, and for every instance
 * sharing Redis), and per process; they are ended when the server closes, so that clients reconnect, with
 * Last-Event-ID, to a server that is still up.
 */
export const eventsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const dispatcher = app.events;
  const { perClient, heartbeatMs, replayMaxEvents, replayMaxBytes } = app.config.events;
  const replayLimits = { maxEvents: replayMaxEvents, maxBytes: replayMaxBytes };
  const refuse = (reply: FastifyReply, refusal: HttpError) => {
    reply.header('retry-after', RETRY_AFTER_SECONDS);
    return refusal;
  };

  /** One of the client's places, or 429 when it holds them all; a place that cannot be counted is not (fail open). */
  async function takePlace(client: string, reply: FastifyReply): Promise<GiveBack> {
    if (perClient === 0) return nothingToGiveBack;
    let giveBack: GiveBack | null;
    try {
      giveBack = await app.streamPlaces.take(client, perClient);
    } catch {
      return nothingToGiveBack;
    }
    if (giveBack === null) throw refuse(reply, rateLimited());
    return giveBack;
  }

  app.get(
    '/events',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['events'],
        operationId: 'GetEvents',
        summary: 'Live stream of new articles and comments, and of your notifications',
        description: EVENT_STREAM_DESCRIPTION,
        querystring: EventsQuery,
        headers: EventsHeaders,
        response: {
          200: { description: 'The stream', content: { 'text/event-stream': { schema: Type.String() } } },
          ...errorResponses(404),
        },
      },
    },
    async (request, reply) => {
      // On every answer, the refusals (404, 429, 503) too: a client that reconnects later opens a new connection
      // anyway, and one kept alive would hold up the server's shutdown until the client lets it go.
      reply.header('connection', 'close');
      const filter = await filterOf(request);
      const resumeAfter = request.query.lastEventId ?? request.headers['last-event-id'];
      const givePlace = await takePlace(clientKey(request), reply);
      if (!dispatcher.admit()) {
        givePlace();
        throw refuse(reply, new HttpError(503, { streams: ['too many open, retry later'] }));
      }

      const stream = new EventStream(filter, reply.raw, dispatcher.buffers, { heartbeatMs, resuming: resumeAfter !== undefined });
      stream.body.on('close', () => {
        dispatcher.unsubscribe(stream);
        dispatcher.release();
        givePlace();
      });
      let live: StreamPosition;
      let missedAfter: StreamPosition | null = null;
      try {
        // Subscribed before reading what was missed, so that nothing written meanwhile falls between the two.
        live = await dispatcher.subscribe(stream);
        if (resumeAfter !== undefined) missedAfter = await positionAfterEvent(request.db, Number(resumeAfter));
      } catch (error) {
        stream.body.destroy();
        throw error;
      }
      if (missedAfter !== null) {
        stream.catchUp(request.db, missedAfter, live, replayLimits).catch((error: unknown) => {
          request.log.warn({ err: error }, 'could not read the missed events of a resuming stream');
          stream.cut();
        });
      }
      // Sent with the first frame.
      return (
        reply
          .type('text/event-stream')
          .header('cache-control', 'no-cache')
          .header('x-accel-buffering', 'no')
          // The schema documents the frames as text; what is sent is the stream that carries them.
          .send(stream.body as unknown as string)
      );
    },
  );
};
