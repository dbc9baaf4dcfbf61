import type { Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { toIso } from '../../schemas.js';
import { type Actor, type ArticleRef, findArticleRef, isPublicNow } from '../articles/write.js';
import { appendEvent, mentionOf } from '../events/outbox.js';
import { followedByViewer, presentTo, toProfile } from '../profiles/queries.js';

/** All comments of an article with their authors, oldest first, in one query; those of leaving accounts left out. */
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
    .where((eb) => presentTo(eb, viewerId))
    .orderBy('comments.created_at')
    .orderBy('comments.id')
    .execute();
  return rows.map((row) => toComment(row, toProfile(row)));
}

export function toComment(row: { id: number; body: string; created_at: number; updated_at: number }, author: ReturnType<typeof toProfile>) {
  return { id: row.id, createdAt: toIso(row.created_at), updatedAt: toIso(row.updated_at), body: row.body, author };
}

/**
 * The `{ comments }` answer on the article with this slug as this viewer sees it; undefined when there is no such
 * article.
 */
export async function getCommentsAnswer(db: Executor, slug: string, viewerId: number | null) {
  const article = await findArticleRef(db, slug, viewerId);
  return article === undefined ? undefined : { comments: await listComments(db, article.id, viewerId) };
}

/** The new comment, with its event (which notifies the article's author) in the same transaction. */
export function addComment(db: Executor, article: ArticleRef, author: Actor, body: string, now: number) {
  return inTransaction(db, async (trx) => {
    const comment = await trx
      .insertInto('comments')
      .values({ article_id: article.id, author_id: author.id, body, created_at: now, updated_at: now })
      .returning(['id', 'body', 'created_at', 'updated_at'])
      .executeTakeFirstOrThrow();
    // Nobody follows themselves, so the author's own profile needs no query.
    const answer = { comment: toComment(comment, toProfile({ ...author, following: false })) };
    await appendEvent(
      trx,
      {
        type: 'comment.created',
        actorId: author.id,
        ownerId: article.author_id,
        articleId: article.id,
        commentId: comment.id,
        data: { article: mentionOf(article), ...answer },
        public: isPublicNow(article, now),
      },
      now,
    );
    return answer;
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

export function deleteComment(db: Executor, article: ArticleRef, commentId: number, actorId: number, now: number): Promise<void> {
  return inTransaction(db, async (trx) => {
    const deleted = await trx.deleteFrom('comments').where('id', '=', commentId).executeTakeFirst();
    if (deleted.numDeletedRows === 0n) return;
    await appendEvent(
      trx,
      {
        type: 'comment.deleted',
        actorId,
        ownerId: article.author_id,
        articleId: article.id,
        data: { article: mentionOf(article), comment: { id: commentId } },
        public: isPublicNow(article, now),
      },
      now,
    );
  });
}
