import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Executor } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import { moderationState, toIso } from '../../schemas.js';
import { type Actor, type ArticleRef, findArticleRef, isPublicNow } from '../articles/write.js';
import { appendEvent, mentionOf } from '../events/outbox.js';
import { followedByViewer, presentTo, toProfile } from '../profiles/queries.js';

/** What a comment answer shows of the comment and its author. */
const commentsWithAuthors = (db: Executor) =>
  db
    .selectFrom('comments')
    .innerJoin('users', 'users.id', 'comments.author_id')
    .select([
      'comments.id',
      'comments.body',
      'comments.hidden_reason',
      'comments.created_at',
      'comments.updated_at',
      'users.username',
      'users.bio',
      'users.image',
    ]);

/**
 * Whether the viewer sees the comment, hidden ones (modules/moderation) showing only to their author and the
 * article's, who may unhide what they hid.
 */
export function shownTo(
  eb: ExpressionBuilder<Database, 'comments'>,
  article: Pick<ArticleRef, 'author_id'>,
  viewerId: number | null,
): Expression<SqlBool> {
  if (viewerId === article.author_id) return eb.lit(true).$castTo<SqlBool>();
  return eb.or([eb('comments.hidden_reason', 'is', null), ...(viewerId === null ? [] : [eb('comments.author_id', '=', viewerId)])]);
}

/**
 * All comments of an article with their authors, oldest first, in one query; those of leaving accounts left out, and
 * hidden ones (modules/moderation) but for their author and the article's, who may unhide what they hid.
 */
async function listComments(db: Executor, article: Pick<ArticleRef, 'id' | 'author_id'>, viewerId: number | null) {
  const rows = await commentsWithAuthors(db)
    .select((eb) => followedByViewer(eb, viewerId).as('following'))
    .where('comments.article_id', '=', article.id)
    .where((eb) => presentTo(eb, viewerId))
    .where((eb) => shownTo(eb, article, viewerId))
    .orderBy('comments.created_at')
    .orderBy('comments.id')
    .execute();
  return rows.map((row) => toComment(row, toProfile(row)));
}

export function toComment(
  row: { id: number; body: string; created_at: number; updated_at: number; hidden_reason?: string | null },
  author: ReturnType<typeof toProfile>,
) {
  return {
    id: row.id,
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
    body: row.body,
    author,
    ...moderationState(row.hidden_reason ?? null),
  };
}

/**
 * The `{ comments }` answer on the article with this slug as this viewer sees it; undefined when there is no such
 * article.
 */
export async function getCommentsAnswer(db: Executor, slug: string, viewerId: number | null) {
  const article = await findArticleRef(db, slug, viewerId);
  return article === undefined ? undefined : { comments: await listComments(db, article, viewerId) };
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

/** The `{ comment }` answer as its author sees it: with `moderation` while hidden. */
export async function commentAsAuthorSees(db: Executor, id: number) {
  const row = await commentsWithAuthors(db).where('comments.id', '=', id).executeTakeFirst();
  if (row === undefined) throw notFound('comment');
  return { comment: toComment(row, toProfile({ ...row, following: false })) };
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
