import { moveCounter, readCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { perDatabase } from '../../db/per-database.js';
import { inTransaction } from '../../db/transaction.js';
import { VersionedCache } from '../../db/versioned-cache.js';
import { toIso } from '../../schemas.js';
import { shareAnswer } from '../../shared-answers.js';
import { findArticleRef } from '../articles/write.js';
import { followedByViewer, toProfile } from '../profiles/queries.js';

/** All comments of an article with their authors, oldest first, in one query. */
async function listComments(db: Executor, articleId: number, viewerId: number | null) {
  const rows = await db
    .selectFrom('comments')
    .innerJoin('users', 'users.id', 'comments.author_id')
    .select((eb) => [
      'comments.id',
      'comments.body',
      'comments.created_at',
      'comments.updated_at',
      'users.username',
      'users.bio',
      'users.image',
      followedByViewer(eb, viewerId).as('following'),
    ])
    .where('comments.article_id', '=', articleId)
    .orderBy('comments.created_at')
    .orderBy('comments.id')
    .execute();
  return rows.map((row) => toComment(row, toProfile(row)));
}

export function toComment(row: { id: number; body: string; created_at: number; updated_at: number }, author: ReturnType<typeof toProfile>) {
  return { id: row.id, createdAt: toIso(row.created_at), updatedAt: toIso(row.updated_at), body: row.body, author };
}

type CommentsAnswer = { comments: Awaited<ReturnType<typeof listComments>> };

/** Comment lists are bounded by size (a comment runs up to 10,000 characters): about 64 MB of text at most, encodings included. */
const COMMENT_CACHE_CHARACTERS = 32_000_000;
const ARTICLE_ID_ENTRIES = 10_000;
const weighComments = (answer: CommentsAnswer) => answer.comments.reduce((sum, comment) => sum + 300 + comment.body.length, 100);

/**
 * Per database, valid while `content_version` stands still: comments move it as articles do, and so do the
 * authors' profiles and follows. Which article a slug names (null: none), the answer anonymous readers share per
 * article, and each signed-in viewer's own answer (with their following flags), all kept by slug.
 */
const cachesFor = perDatabase((db) => ({
  articleIds: new VersionedCache<number | null>(db, ARTICLE_ID_ENTRIES),
  anonymous: new VersionedCache<CommentsAnswer>(db, COMMENT_CACHE_CHARACTERS, weighComments),
  viewers: new VersionedCache<CommentsAnswer>(db, COMMENT_CACHE_CHARACTERS, weighComments),
}));

/**
 * The `{ comments }` answer on the article with this slug as this viewer sees it; undefined when there is no such
 * article.
 */
export async function getCommentsAnswer(db: Executor, slug: string, viewerId: number | null): Promise<CommentsAnswer | undefined> {
  const version = await readCounter(db, 'content_version');
  const caches = cachesFor(db);
  const articleId = await caches.articleIds.get(version, slug, async () => (await findArticleRef(db, slug))?.id ?? null);
  if (articleId === null) return undefined;
  const load = async () => shareAnswer({ comments: await listComments(db, articleId, viewerId) });
  return viewerId === null ? caches.anonymous.get(version, slug, load) : caches.viewers.get(version, `${viewerId} ${slug}`, load);
}

export function insertComment(db: Executor, comment: { articleId: number; authorId: number; body: string }, now: number) {
  return inTransaction(db, async (trx) => {
    const inserted = await trx
      .insertInto('comments')
      .values({ article_id: comment.articleId, author_id: comment.authorId, body: comment.body, created_at: now, updated_at: now })
      .returning(['id', 'body', 'created_at', 'updated_at'])
      .executeTakeFirstOrThrow();
    await moveCounter(trx, 'content_version', 1);
    return inserted;
  });
}

export function findComment(db: Executor, articleId: number, commentId: number) {
  return db
    .selectFrom('comments')
    .select(['id', 'author_id'])
    .where('id', '=', commentId)
    .where('article_id', '=', articleId)
    .executeTakeFirst();
}

export function deleteComment(db: Executor, commentId: number): Promise<void> {
  return inTransaction(db, async (trx) => {
    const { numDeletedRows } = await trx.deleteFrom('comments').where('id', '=', commentId).executeTakeFirstOrThrow();
    // A comment deleted a moment ago by someone else changed nothing now.
    if (numDeletedRows > 0n) await moveCounter(trx, 'content_version', 1);
  });
}
