import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import { isForeignKeyViolation } from '../../db/constraints.js';
import type { Executor } from '../../db/index.js';
import { forbidden, notFound, unprocessable } from '../../errors.js';
import { ifMatchPrecondition, strongTag } from '../../plugins/conditional-get.js';
import { errorResponses, IfMatchHeaders } from '../../schemas.js';
import { readsAsModerator } from '../moderation/roles.js';
import { areSeparated, type Screening, screeningOf } from '../profiles/blocks.js';
import { signedIn, viewerId } from '../users/auth.js';
import { type ListAnswer, listArticles, listOwnArticles, type Page } from './list.js';
import {
  ArticleListResponse,
  ArticleResponse,
  FeedQuery,
  FeedResponse,
  ListQuery,
  NewArticleBody,
  OwnArticlesQuery,
  SlugParams,
  UpdateArticleBody,
} from './schemas.js';
import { inSearchTurn } from './search-turns.js';
import { getArticleAnswer } from './view.js';
import { createArticle, deleteArticle, existingArticleRef, setFavorite, updateArticle } from './write.js';

/** A page starts at an offset or after a cursor; both at once would be ambiguous. */
export function pageOf<P extends Page>(page: P): P {
  if (page.cursor !== undefined && page.offset > 0) throw unprocessable('cursor', 'cannot be combined with offset');
  return page;
}

/** Fastify's serialiser API is typed for plain JSON Schema objects; a TypeBox schema is one. */
const ARTICLE_SCHEMA = ArticleResponse as unknown as Record<string, unknown>;

/** Reads an article for the response; it can only be missing if it was deleted a moment ago. */
const articleView = async (
  db: Executor,
  where: { slug: string } | { id: number },
  viewer: number | null,
  screener: Screening | null = null,
  moderator = false,
) => {
  const answer = await getArticleAnswer(db, where, viewer, screener, moderator);
  if (answer === undefined) throw notFound('article');
  return answer;
};

/**
 * If-Match, judged on the ETag a GET of the article by this requester would carry now: its answer, serialised by the
 * same schema, hashed. Existence and ownership are settled before, so 404 and 403 come first, as RFC 9110 orders them.
 */
export const unchangedSinceRead = (request: FastifyRequest, reply: FastifyReply, id: number, viewer: number) =>
  ifMatchPrecondition(request, async (trx) => strongTag(reply.serializeInput(await articleView(trx, { id }, viewer), ARTICLE_SCHEMA)));

/**
 * For the writes that answer the article as its author would GET it now: the answer's ETag lets the next edit send
 * If-Match at once.
 */
export const tagEditedArticle: onSendHookHandler = async (_request, reply, payload) => {
  if (reply.statusCode === 200 && typeof payload === 'string') reply.header('etag', strongTag(payload));
  return payload;
};

export const articlesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  /** Existence (404) before ownership (403), as the contract orders them. */
  const ownArticle = async (db: Executor, slug: string, userId: number) => {
    const article = await existingArticleRef(db, slug, userId);
    if (article.author_id !== userId) throw forbidden('article');
    return article;
  };

  app.get(
    '/articles',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['articles'],
        operationId: 'GetArticles',
        summary: 'List articles, newest first',
        querystring: ListQuery,
        response: { 200: ArticleListResponse, ...errorResponses(401, 422, 429, 503) },
      },
    },
    async (request, reply) => {
      const { tag, author, favorited, q, ...page } = request.query;
      const filters = { tag, author, favorited, q, screenedBy: screeningOf(request) ?? undefined };
      // A replica chosen for this reader takes its search too; SQLite's searcher is its worker thread.
      const searcher = {
        db: request.reader ?? app.searcher,
        inTurn: (search: () => Promise<ListAnswer>) => inSearchTurn(request, reply, search),
      };
      return listArticles(request.db, filters, pageOf(page), viewerId(request), searcher);
    },
  );

  app.get(
    '/articles/feed',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['articles'],
        operationId: 'GetArticlesFeed',
        summary: 'Articles by followed users, newest first',
        querystring: FeedQuery,
        response: { 200: FeedResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      const me = signedIn(request).account.id;
      return listArticles(request.db, { followedBy: me, screenedBy: screeningOf(request) ?? undefined }, pageOf(request.query), me);
    },
  );

  app.get(
    '/user/articles',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['articles'],
        operationId: 'GetOwnArticles',
        summary: "The caller's own articles in every state (drafts, scheduled, published, unpublished), newest change first",
        querystring: OwnArticlesQuery,
        response: { 200: FeedResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      const { status, ...page } = request.query;
      return listOwnArticles(request.db, signedIn(request).account.id, status, pageOf(page));
    },
  );

  app.post(
    '/articles',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['articles'],
        operationId: 'CreateArticle',
        summary: 'Create an article',
        body: NewArticleBody,
        response: { 201: ArticleResponse, ...errorResponses(401, 422) },
      },
    },
    async (request, reply) => {
      return reply.code(201).send(await createArticle(request.db, signedIn(request).account, request.body.article, Date.now()));
    },
  );

  app.get(
    '/articles/:slug',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['articles'],
        operationId: 'GetArticle',
        summary: 'Get an article',
        params: SlugParams,
        response: { 200: ArticleResponse, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) =>
      articleView(request.db, { slug: request.params.slug }, viewerId(request), screeningOf(request), readsAsModerator(request)),
  );

  app.put(
    '/articles/:slug',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['articles'],
        operationId: 'UpdateArticle',
        summary: 'Update an article (partial)',
        params: SlugParams,
        headers: IfMatchHeaders,
        body: UpdateArticleBody,
        response: { 200: ArticleResponse, ...errorResponses(401, 403, 404, 409, 412, 422) },
      },
      onSend: tagEditedArticle,
    },
    async (request, reply) => {
      const me = signedIn(request).account.id;
      const article = await ownArticle(request.db, request.params.slug, me);
      const precondition = unchangedSinceRead(request, reply, article.id, me);
      const answer = await updateArticle(request.db, article, request.body.article, Date.now(), precondition);
      if (answer === undefined) throw notFound('article');
      return answer;
    },
  );

  app.delete(
    '/articles/:slug',
    {
      config: { auth: 'required' },
      schema: {
        tags: ['articles'],
        operationId: 'DeleteArticle',
        summary: 'Delete an article with its comments and favorites',
        params: SlugParams,
        headers: IfMatchHeaders,
        response: { 204: { type: 'null', description: 'Deleted' }, ...errorResponses(401, 403, 404, 412, 422) },
      },
    },
    async (request, reply) => {
      const me = signedIn(request).account.id;
      const article = await ownArticle(request.db, request.params.slug, me);
      await deleteArticle(request.db, article, Date.now(), unchangedSinceRead(request, reply, article.id, me));
      return reply.code(204).send(null);
    },
  );

  for (const [method, favorite] of [
    ['POST', true],
    ['DELETE', false],
  ] as const) {
    app.route({
      method,
      url: '/articles/:slug/favorite',
      config: { auth: 'required' },
      schema: {
        tags: ['favorites'],
        operationId: favorite ? 'CreateArticleFavorite' : 'DeleteArticleFavorite',
        summary: favorite ? 'Favorite an article' : 'Unfavorite an article',
        params: SlugParams,
        response: { 200: ArticleResponse, ...errorResponses(401, 404, 422) },
      },
      handler: async (request) => {
        const me = signedIn(request).account;
        const article = await existingArticleRef(request.db, request.params.slug, me.id);
        let changed: boolean;
        try {
          changed = await setFavorite(request.db, me, article, favorite, Date.now());
        } catch (error) {
          if (isForeignKeyViolation(error)) throw notFound('article');
          throw error;
        }
        // Nothing written: a repeat, or a block between the two; only the second is asked, and only then. Taking a
        // favorite back across a block is refused as well: its answer is the article, which the block hides.
        if (!changed && (await areSeparated(request.db, me.id, article.author_id))) throw forbidden('article');
        return articleView(request.db, { id: article.id }, me.id);
      },
    });
  }
};
