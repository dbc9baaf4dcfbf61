import type { Executor } from '../../db/index.js';
import { toIso } from '../../schemas.js';
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

/**
 * The `{ comments }` answer on the article with this slug as this viewer sees it; undefined when there is no such
 * article.
 */
export async function getCommentsAnswer(db: Executor, slug: string, viewerId: number | null) {
  const article = await findArticleRef(db, slug);
  return article === undefined ? undefined : { comments: await listComments(db, article.id, viewerId) };
}

export function insertComment(db: Executor, comment: { articleId: number; authorId: number; body: string }, now: number) {
  return db
    .insertInto('comments')
    .values({ article_id: comment.articleId, author_id: comment.authorId, body: comment.body, created_at: now, updated_at: now })
    .returning(['id', 'body', 'created_at', 'updated_at'])
    .executeTakeFirstOrThrow();
}

export function findComment(db: Executor, articleId: number, commentId: number) {
  return db
    .selectFrom('comments')
    .select(['id', 'author_id'])
    .where('id', '=', commentId)
    .where('article_id', '=', articleId)
    .executeTakeFirst();
}

export async function deleteComment(db: Executor, commentId: number): Promise<void> {
  await db.deleteFrom('comments').where('id', '=', commentId).execute();
}
