import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, rateLimited } from '../../errors.js';
import { FairTurns } from '../../fair-turns.js';
import { clientKey } from '../../plugins/rate-limit.js';

/**
 * Searches running or waiting, all clients together: past this a search gets a 503 at once instead of waiting for
 * seconds. A SQLite search is a few statements of a few milliseconds in the worker thread, a common word's tens.
 */
const SEARCHES_HELD_MAX = 64;
const RETRY_AFTER_SECONDS = 1;

export const searchTurns = (atOnce: number, perClient: number) =>
  new FairTurns(atOnce, perClient === 0 ? Number.POSITIVE_INFINITY : perClient, SEARCHES_HELD_MAX);

/** A signed-in client by its account, so that people behind one address search apart; anyone else by address. */
const searchClient = (request: FastifyRequest) =>
  request.currentUser === null ? `address:${clientKey(request)}` : `user:${request.currentUser.account.id}`;

/**
 * Runs a search in its client's turn (FairTurns): a client that sends many searches at once waits for its own, and
 * delays anyone else's by one search at most.
 */
export async function inSearchTurn<T>(request: FastifyRequest, reply: FastifyReply, search: () => Promise<T>): Promise<T> {
  const answer = request.server.searchTurns.run(searchClient(request), search);
  if (typeof answer !== 'string') return answer;
  reply.header('retry-after', RETRY_AFTER_SECONDS);
  throw answer === 'client' ? rateLimited() : new HttpError(503, { search: ['too many at once, retry later'] });
}
