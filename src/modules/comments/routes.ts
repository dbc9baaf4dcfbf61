import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { isForeignKeyViolation } from '../../db/constraints.js';
import { forbidden, notFound } from '../../errors.js';
import { errorResponses } from '../../schemas.js';
import { SlugParams } from '../articles/schemas.js';
import { existingArticleRef } from '../articles/write.js';
import { findModeratedComment, setCommentModeration } from '../moderation/actions.js';
import { readsAsModerator } from '../moderation/roles.js';
import { bodyOptional, HideBody, UnhideBody } from '../moderation/schemas.js';
import { screeningOf } from '../profiles/blocks.js';
import { signedIn, viewerId } from '../users/auth.js';
import { addComment, commentAsAuthorSees, deleteComment, findComment, getCommentsAnswer } from './queries.js';
import { CommentListResponse, CommentParams, CommentResponse, NewCommentBody } from './schemas.js';

export const commentsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/articles/:slug/comments',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['comments'],
        operationId: 'GetArticleComments',
        summary: 'Comments on an article, oldest first',
        params: SlugParams,
        response: { 200: CommentListResponse, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const answer = await getCommentsAnswer(
        request.db,
        request.params.slug,
        viewerId(request),
        screeningOf(request),
        readsAsModerator(request),
      );
      if (answer === undefined) throw notFound('article');
      return answer;
    },
  );

  app.post(
    '/articles/:slug/comments',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['comments'],
        operationId: 'CreateArticleComment',
        summary: 'Comment on an article',
        params: SlugParams,
        body: NewCommentBody,
        response: { 201: CommentResponse, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const { account } = signedIn(request);
      const article = await existingArticleRef(request.db, request.params.slug, account.id);
      let answer: Awaited<ReturnType<typeof addComment>>;
      try {
        answer = await addComment(request.db, article, account, request.body.comment.body, Date.now());
      } catch (error) {
        if (isForeignKeyViolation(error)) throw notFound('article');
        throw error;
      }
      if (answer === undefined) throw forbidden('article');
      return reply.code(201).send(answer);
    },
  );

  for (const hide of [true, false]) {
    app.post(
      `/articles/:slug/comments/:id/${hide ? 'hide' : 'unhide'}`,
      {
        config: { auth: 'required' },
        ...(!hide && { preValidation: bodyOptional }),
        schema: {
          tags: ['comments'],
          operationId: hide ? 'HideArticleComment' : 'UnhideArticleComment',
          summary: hide
            ? "Hide a comment on your article from everyone but its author (the article's author)"
            : 'Show again a comment you hid on your article',
          description: "A comment a moderator hid stays hidden: only a moderator shows it again (403 for the article's author).",
          params: CommentParams,
          body: hide ? HideBody : UnhideBody,
          response: { 200: CommentResponse, ...errorResponses(401, 403, 404, 422) },
        },
      },
      async (request) => {
        const { account } = signedIn(request);
        const article = await existingArticleRef(request.db, request.params.slug, account.id);
        const comment = await findModeratedComment(request.db, request.params.id, article.id);
        if (article.author_id !== account.id || comment.author_id === account.id) throw forbidden('comment');
        if (!hide && comment.hidden_by !== null && comment.hidden_by !== account.id) throw forbidden('comment');
        await setCommentModeration(request.db, account, comment, { hide, reason: request.body.moderation?.reason ?? null }, Date.now());
        return commentAsAuthorSees(request.db, comment.id);
      },
    );
  }

  app.delete(
    '/articles/:slug/comments/:id',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['comments'],
        operationId: 'DeleteArticleComment',
        summary: "Delete a comment (its author or the article's author)",
        params: CommentParams,
        response: { 204: { type: 'null', description: 'Deleted' }, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const me = signedIn(request).account.id;
      const article = await existingArticleRef(request.db, request.params.slug, me);
      const comment = await findComment(request.db, article.id, request.params.id);
      if (comment === undefined) throw notFound('comment');
      if (comment.author_id !== me && article.author_id !== me) throw forbidden('comment');
      await deleteComment(request.db, article, comment.id, me, Date.now());
      return reply.code(204).send(null);
    },
  );
};
