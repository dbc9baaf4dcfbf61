import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Executor } from '../../db/index.js';
import { preparedQuery } from '../../db/prepared.js';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import { moderationState, toIso } from '../../schemas.js';
import { type Actor, type ArticleRef, findArticleRef, isPublicNow } from '../articles/write.js';
import { appendEvent, mentionOf } from '../events/outbox.js';
import { noBlockBetween, type ScreenedList, type Screening, screenedAmong, screenedList } from '../profiles/blocks.js';
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
  moderator = false,
): Expression<SqlBool> {
  return shownToViewer(eb, viewerId, moderator || viewerId === article.author_id);
}

/** `shownTo` once it is known whether the viewer sees every comment of the article. */
function shownToViewer(eb: ExpressionBuilder<Database, 'comments'>, viewerId: number | null, seesHidden: boolean): Expression<SqlBool> {
  if (seesHidden) return eb.lit(true).$castTo<SqlBool>();
  return eb.or([eb('comments.hidden_reason', 'is', null), ...(viewerId === null ? [] : [eb('comments.author_id', '=', viewerId)])]);
}

interface CommentListValues {
  articleId: number;
  viewerId?: number;
  /** A moderator, or the article's author (shownTo). */
  seesHidden?: true;
  screened?: ScreenedList;
}

/**
 * All comments of an article with their authors, oldest first, in one query built once per shape (db/prepared.ts);
 * those of leaving accounts left out, those of the authors the viewer screens (profiles/blocks.ts) when they screen
 * anyone, and hidden ones but for whom `shownTo` shows them.
 */
const commentList = preparedQuery((db: Executor, values: CommentListValues) => {
  const viewerId = values.viewerId ?? null;
  return commentsWithAuthors(db)
    .select((eb) => followedByViewer(eb, viewerId).as('following'))
    .where('comments.article_id', '=', values.articleId)
    .where((eb) => presentTo(eb, viewerId))
    .where((eb) => shownToViewer(eb, viewerId, values.seesHidden !== undefined))
    .$if(values.screened !== undefined, (query) => query.where('comments.author_id', 'not in', screenedAmong(db, values.screened!)))
    .orderBy('comments.created_at')
    .orderBy('comments.id');
});

async function listComments(
  db: Executor,
  article: Pick<ArticleRef, 'id' | 'author_id'>,
  viewerId: number | null,
  screener: Screening | null,
  moderator: boolean,
) {
  const rows = await commentList.execute(db, {
    articleId: article.id,
    viewerId: viewerId ?? undefined,
    seesHidden: moderator || viewerId === article.author_id || undefined,
    screened: screener === null ? undefined : screenedList(db, screener),
  });
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
 * article, or a block separates the viewer from its author.
 */
export async function getCommentsAnswer(
  db: Executor,
  slug: string,
  viewerId: number | null,
  screener: Screening | null,
  moderator: boolean,
) {
  const article = await findArticleRef(db, slug, viewerId, screener, moderator);
  return article === undefined ? undefined : { comments: await listComments(db, article, viewerId, screener, moderator) };
}

/**
 * The new comment, with its event (which notifies the article's author) in the same transaction; undefined when a
 * block stands between the commenter and the article's author, judged by the insert itself (profiles/blocks.ts).
 */
export function addComment(db: Executor, article: ArticleRef, author: Actor, body: string, now: number) {
  return inTransaction(db, async (trx) => {
    const comment = await trx
      .insertInto('comments')
      .columns(['article_id', 'author_id', 'body', 'created_at', 'updated_at'])
      .expression(
        // Typed, because PostgreSQL reads an untyped parameter in a SELECT as text.
        trx
          .selectNoFrom((eb) => [
            eb.cast<number>(eb.val(article.id), 'integer').as('article_id'),
            eb.cast<number>(eb.val(author.id), 'integer').as('author_id'),
            eb.cast<string>(eb.val(body), 'text').as('body'),
            eb.cast<number>(eb.val(now), 'bigint').as('created_at'),
            eb.cast<number>(eb.val(now), 'bigint').as('updated_at'),
          ])
          .where((eb) => noBlockBetween(eb, trx, author.id, article.author_id)),
      )
      .returning(['id', 'body', 'created_at', 'updated_at'])
      .executeTakeFirst();
    if (comment === undefined) return undefined;
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
