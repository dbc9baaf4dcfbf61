import { setImmediate as nextTurn } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import { unauthorized } from '../../errors.js';
import { toIso } from '../../schemas.js';
import { toSummary, withArticleView } from '../articles/view.js';
import { visibleTo } from '../articles/visibility.js';
import { notificationsBefore } from '../notifications/queries.js';
import { decisionRows, toDecision } from '../reports/decisions.js';
import { reportRows, toFiledReport } from '../reports/queries.js';
import { revisionsWithBody, toRevision } from '../revisions/queries.js';
import { listEndpoints } from '../webhooks/queries.js';

/** One export per account per this long. */
export const EXPORT_INTERVAL_MS = 10 * 60 * 1000;

/** Rows read per statement: each batch is all the export holds of a section at once (comments: 10,000 characters at most). */
const BATCH = 500;
/**
 * Article bodies run to 100,000 characters: ten stay within a couple of MB whatever they hold. Batches of 50 lived
 * long enough to be moved out of V8's young generation, and exporting 10,000 articles grew the server by 14-70 MB
 * instead of 15-25.
 */
const ARTICLE_BATCH = 10;

/**
 * Takes the account's export for now, or says how long until the next one is allowed. One conditional UPDATE of the
 * account's row: two requests at once, on any instance or process, cannot both take it, and the row it returns is
 * the account as the export shows it.
 */
export async function claimExport(db: Executor, userId: number, now: number) {
  const claimed = await db
    .updateTable('users')
    .set({ last_export_at: now })
    .where('id', '=', userId)
    .where((eb) => eb.or([eb('last_export_at', 'is', null), eb('last_export_at', '<=', now - EXPORT_INTERVAL_MS)]))
    .returning(['id', 'email', 'username', 'bio', 'image', 'created_at', 'updated_at'])
    .executeTakeFirst();
  if (claimed !== undefined) {
    const { id, email, username, bio, image } = claimed;
    return { id, user: { email, username, bio, image, createdAt: toIso(claimed.created_at), updatedAt: toIso(claimed.updated_at) } };
  }
  const held = await db.selectFrom('users').select('last_export_at').where('id', '=', userId).executeTakeFirst();
  // Deleted since the token was checked, as a token for a deleted account is answered.
  if (held === undefined) throw unauthorized('is invalid');
  return { retryAfterMs: (held.last_export_at ?? now) + EXPORT_INTERVAL_MS - now };
}

/**
 * Every row of a section, a batch at a time, each batch one short statement that starts after the last row of the one
 * before (keyset pagination on an index, so the last batch costs what the first did). Between batches no connection
 * is held and nothing is read until the consumer asks for more.
 *
 * Each batch waits for the event loop's next turn first. SQLite reads synchronously, and while the client keeps up
 * every write to it succeeds at once: without the pause the whole export ran as one chain of microtasks, and nothing
 * else (other requests, timers) ran until it ended.
 */
async function* inBatches<Row, Item>(
  size: number,
  read: (after: number | undefined) => Promise<Row[]>,
  keyOf: (row: Row) => number,
  shape: (row: Row) => Item,
): AsyncGenerator<Item[]> {
  let after: number | undefined;
  for (;;) {
    await nextTurn();
    const rows = await read(after);
    if (rows.length > 0) yield rows.map(shape);
    if (rows.length < size) return;
    after = keyOf(rows.at(-1)!);
  }
}

/** The user's articles in every state, as the author sees them, oldest first, with the id their revisions are read by. */
export const articlesOf = (db: Executor, userId: number, now: number) =>
  inBatches(
    ARTICLE_BATCH,
    (after) =>
      withArticleView(
        db
          .selectFrom('articles')
          .where('articles.author_id', '=', userId)
          .$if(after !== undefined, (query) => query.where('articles.id', '>', after!))
          .orderBy('articles.id')
          .limit(sql.lit(ARTICLE_BATCH)),
        userId,
      )
        .select(['articles.id', 'articles.body'])
        .execute(),
    (row) => row.id,
    (row) => ({ id: row.id, article: { ...toSummary(row, now), body: row.body } }),
  );

/** The revisions of one of the user's articles, oldest first, as GET …/revisions/:id shows each, a few at a time. */
export const revisionsOf = (db: Executor, articleId: number) =>
  inBatches(
    ARTICLE_BATCH,
    (after) =>
      revisionsWithBody(db, articleId)
        .$if(after !== undefined, (query) => query.where('id', '>', after!))
        .orderBy('id')
        .limit(sql.lit(ARTICLE_BATCH))
        .execute(),
    (row) => row.id,
    toRevision,
  );

/**
 * The user's comments, oldest first, with the article each is on. The comment is the user's own writing and always
 * exported; the article is named only while the user may still see it, as everywhere else.
 */
export const commentsOf = (db: Executor, userId: number, now: number) =>
  inBatches(
    BATCH,
    (after) =>
      db
        .selectFrom('comments')
        .innerJoin('articles', 'articles.id', 'comments.article_id')
        .select((eb) => [
          'comments.id',
          'comments.body',
          'comments.created_at',
          'comments.updated_at',
          'articles.slug',
          'articles.title',
          visibleTo(eb, userId, now).as('visible'),
        ])
        .where('comments.author_id', '=', userId)
        .$if(after !== undefined, (query) => query.where('comments.id', '>', after!))
        .orderBy('comments.id')
        .limit(sql.lit(BATCH))
        .execute(),
    (row) => row.id,
    (row) => ({
      id: row.id,
      body: row.body,
      createdAt: toIso(row.created_at),
      updatedAt: toIso(row.updated_at),
      // SQLite answers a comparison with 0/1, PostgreSQL with a boolean.
      article: row.visible ? { slug: row.slug, title: row.title } : null,
    }),
  );

/** The articles the user favorited and may still see, keyed by the article: a favorite has no id of its own. */
export const favoritesOf = (db: Executor, userId: number, now: number) =>
  inBatches(
    BATCH,
    (after) =>
      db
        .selectFrom('favorites')
        .innerJoin('articles', 'articles.id', 'favorites.article_id')
        .select(['favorites.article_id', 'favorites.created_at', 'articles.slug', 'articles.title'])
        .where('favorites.user_id', '=', userId)
        .where((eb) => visibleTo(eb, userId, now))
        .$if(after !== undefined, (query) => query.where('favorites.article_id', '>', after!))
        .orderBy('favorites.article_id')
        .limit(sql.lit(BATCH))
        .execute(),
    (row) => row.article_id,
    (row) => ({ slug: row.slug, title: row.title, favoritedAt: toIso(row.created_at) }),
  );

/**
 * One side of the user's follows, keyed by the other user's id: whom they follow (through the primary key) or who
 * follows them (through follows_followed_idx).
 */
export function followsOf(db: Executor, userId: number, side: 'following' | 'followers') {
  const [mine, theirs] = side === 'following' ? (['follower_id', 'followed_id'] as const) : (['followed_id', 'follower_id'] as const);
  return inBatches(
    BATCH,
    (after) =>
      db
        .selectFrom('follows')
        .innerJoin('users', 'users.id', `follows.${theirs}`)
        .select([`follows.${theirs} as other_id`, 'users.username', 'follows.created_at'])
        .where(`follows.${mine}`, '=', userId)
        .$if(after !== undefined, (query) => query.where(`follows.${theirs}`, '>', after!))
        .orderBy(`follows.${theirs}`)
        .limit(sql.lit(BATCH))
        .execute(),
    (row) => row.other_id,
    (row) => ({ username: row.username, since: toIso(row.created_at) }),
  );
}

/** Newest first, keyed backwards, as GET /notifications pages them. */
export const notificationsOf = (db: Executor, userId: number) =>
  inBatches(
    BATCH,
    (before) => notificationsBefore(db, userId, before, BATCH),
    (notification) => notification.id,
    (notification) => notification,
  );

/** The user's endpoints, without their secrets: at most ENDPOINTS_MAX, so one statement. */
export async function* webhooksOf(db: Executor, userId: number) {
  yield (await listEndpoints(db, userId)).webhooks;
}

/**
 * The reports and appeals the user filed, oldest first: theirs to take. Reports about the user are not theirs, and
 * would name who filed them.
 */
export const reportsBy = (db: Executor, userId: number) =>
  inBatches(
    BATCH,
    (after) =>
      reportRows(db, userId)
        .where('reports.reporter_id', '=', userId)
        .$if(after !== undefined, (query) => query.where('reports.id', '>', after!))
        .orderBy('reports.id')
        .limit(sql.lit(BATCH))
        .execute(),
    (row) => row.id,
    toFiledReport,
  );

/** The decisions about the user, oldest first, as GET /user/moderation shows them: none names a reporter. */
export const moderationOf = (db: Executor, userId: number) =>
  inBatches(
    BATCH,
    (after) =>
      decisionRows(db, userId)
        .$if(after !== undefined, (query) => query.where('decision.id', '>', after!))
        .orderBy('decision.id')
        .limit(sql.lit(BATCH))
        .execute(),
    (row) => row.id,
    toDecision,
  );
