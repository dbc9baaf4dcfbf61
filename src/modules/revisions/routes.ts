import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Executor } from '../../db/index.js';
import { notFound } from '../../errors.js';
import { decodeIdCursor } from '../../id-cursor.js';
import { errorResponses, IfMatchHeaders } from '../../schemas.js';
import { pageOf, tagEditedArticle, unchangedSinceRead } from '../articles/routes.js';
import { ArticleResponse, SlugParams } from '../articles/schemas.js';
import { existingArticleRef, updateArticle } from '../articles/write.js';
import { readsAsModerator } from '../moderation/roles.js';
import { signedIn, viewerId } from '../users/auth.js';
import { getRevision, listRevisions } from './queries.js';
import { RevisionListResponse, RevisionParams, RevisionResponse, RevisionsQuery } from './schemas.js';

/**
 * The article when the caller wrote it, or moderates (to read them). Its revisions exist for its author and the
 * moderators alone: anyone else, signed in or not and even one who may read the article, gets the 404 of an article
 * they cannot see, as the contract has it for whatever is not public, so that no answer tells them which revisions
 * there are.
 */
async function authorsArticle(db: Executor, slug: string, viewer: number | null, moderator = false) {
  const article = await existingArticleRef(db, slug, viewer, moderator);
  if (article.author_id !== viewer && !moderator) throw notFound('article');
  return article;
}

async function existingRevision(db: Executor, articleId: number, id: number) {
  const revision = await getRevision(db, articleId, id);
  if (revision === undefined) throw notFound('revision');
  return revision;
}

export const revisionsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/articles/:slug/revisions',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['revisions'],
        operationId: 'GetArticleRevisions',
        summary: "An article's kept revisions, newest first (its author only)",
        params: SlugParams,
        querystring: RevisionsQuery,
        response: { 200: RevisionListResponse, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const { cursor, ...page } = pageOf(request.query);
      // A bad cursor is a bad request (422), judged before the article is looked for (404).
      const before = cursor === undefined ? undefined : decodeIdCursor(cursor, 'bigint');
      const article = await authorsArticle(request.db, request.params.slug, viewerId(request), readsAsModerator(request));
      return listRevisions(request.db, article.id, { ...page, before });
    },
  );

  app.get(
    '/articles/:slug/revisions/:id',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['revisions'],
        operationId: 'GetArticleRevision',
        summary: 'One revision of an article, with its body (its author only)',
        params: RevisionParams,
        response: { 200: RevisionResponse, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const article = await authorsArticle(request.db, request.params.slug, viewerId(request), readsAsModerator(request));
      return { revision: await existingRevision(request.db, article.id, request.params.id) };
    },
  );

  app.post(
    '/articles/:slug/revisions/:id/restore',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['revisions'],
        operationId: 'RestoreArticleRevision',
        summary: "Make a revision's content current again, as an edit would (a new revision; the status stays)",
        params: RevisionParams,
        headers: IfMatchHeaders,
        response: { 200: ArticleResponse, ...errorResponses(401, 404, 412, 422) },
      },
      onSend: tagEditedArticle,
    },
    async (request, reply) => {
      const me = signedIn(request).account.id;
      const article = await authorsArticle(request.db, request.params.slug, me);
      const { title, description, body, tagList } = await existingRevision(request.db, article.id, request.params.id);
      const precondition = unchangedSinceRead(request, reply, article.id, me);
      const answer = await updateArticle(request.db, article, { title, description, body, tagList }, Date.now(), precondition);
      if (answer === undefined) throw notFound('article');
      return answer;
    },
  );
};
