import type { Executor } from '../../db/index.js';
import { toIso } from '../../schemas.js';
import {
  articlesOf,
  commentsOf,
  favoritesOf,
  followsOf,
  moderationOf,
  notificationsOf,
  reportsBy,
  revisionsOf,
  webhooksOf,
} from './queries.js';
import { EXPORT_VERSION } from './schemas.js';

type Batches = AsyncIterable<readonly unknown[]>;

/** A JSON array written a batch at a time: each piece is one batch's items, which JSON.stringify escapes. */
async function* jsonArray(batches: Batches): AsyncGenerator<string> {
  let separator = '[';
  for await (const batch of batches) {
    yield separator + batch.map((item) => JSON.stringify(item)).join(',');
    separator = ',';
  }
  yield separator === '[' ? '[]' : ']';
}

/**
 * Each article with its revisions, which can be far larger than the article (up to 100 versions of its body): the
 * article's own JSON is reopened to take them as an array written a batch at a time.
 */
async function* articlesJson(db: Executor, userId: number, now: number): AsyncGenerator<string> {
  let separator = '[';
  for await (const batch of articlesOf(db, userId, now)) {
    for (const { id, article } of batch) {
      yield `${separator}${JSON.stringify(article).slice(0, -1)},"revisions":`;
      yield* jsonArray(revisionsOf(db, id));
      yield '}';
      separator = ',';
    }
  }
  yield separator === '[' ? '[]' : ']';
}

/**
 * The export document as text, piece by piece, in the order the schema (ExportResponse) lists it. Nothing is read
 * before the consumer asks for the next piece, and no piece holds more than one batch of a section, so the memory it
 * takes does not grow with the account. Sections are read one after another in short statements of their own, not in
 * one transaction: on PostgreSQL a snapshot over the whole export would hold a connection, and keep every row
 * changed meanwhile from being vacuumed, for as long as the slowest client takes to download. Each item is as it was
 * when its batch was read; an item changed or deleted while the export runs may show either state.
 */
export async function* exportDocument(db: Executor, userId: number, user: object, now: number): AsyncGenerator<string> {
  yield `{"export":{"version":${EXPORT_VERSION},"exportedAt":"${toIso(now)}","user":${JSON.stringify(user)},"articles":`;
  yield* articlesJson(db, userId, now);
  const sections: Array<[string, Batches]> = [
    ['comments', commentsOf(db, userId, now)],
    ['favorites', favoritesOf(db, userId, now)],
    ['following', followsOf(db, userId, 'following')],
    ['followers', followsOf(db, userId, 'followers')],
    ['notifications', notificationsOf(db, userId)],
    ['webhooks', webhooksOf(db, userId)],
    ['reports', reportsBy(db, userId)],
    ['moderation', moderationOf(db, userId)],
  ];
  for (const [name, batches] of sections) {
    yield `,"${name}":`;
    yield* jsonArray(batches);
  }
  yield '}}';
}
