import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { notFound, unprocessable } from '../../errors.js';
import { decodeIdCursor } from '../../id-cursor.js';
import { errorResponses, IdPageQuery, toIso } from '../../schemas.js';
import { ArticleResponse, SlugParams } from '../articles/schemas.js';
import { getArticleAnswer } from '../articles/view.js';
import { commentAsAuthorSees } from '../comments/queries.js';
import { CommentResponse } from '../comments/schemas.js';
import { UsernameParams } from '../profiles/schemas.js';
import {
  findModeratedArticle,
  findModeratedComment,
  findModeratedUser,
  type ModeratedUser,
  setArticleModeration,
  setCommentModeration,
  setRole,
  setSuspension,
} from './actions.js';
import { listAuditLog } from './audit-log.js';
import { mayActOn, moderatorOf, suspendedUntil } from './roles.js';
import {
  AuditLogResponse,
  bodyOptional,
  CommentIdParams,
  HideBody,
  ModeratedUserResponse,
  RoleBody,
  SuspendBody,
  UnhideBody,
} from './schemas.js';

const ROUTE = { auth: 'required' } as const;
const FORBIDDEN_OR_MISSING = errorResponses(401, 403, 404, 422);

/** The account as moderators see it: role and suspension (one that has run out reads as none). */
function moderatedUser(user: ModeratedUser) {
  const until = suspendedUntil(user, Date.now());
  return {
    user: {
      username: user.username,
      role: user.role,
      suspension:
        until === undefined
          ? null
          : { since: toIso(user.suspended_at!), until: until === null ? null : toIso(until), reason: user.suspension_reason },
    },
  };
}

/**
 * The moderators' routes (contract, section Moderation): hiding articles and comments, suspension, roles, the audit
 * log. Reports and their queue are in reports.ts. Every route checks the caller's role first (403 for a `user`),
 * then that the caller outranks whoever the action reaches (roles.ts).
 */
export const moderationRoutes: FastifyPluginAsyncTypebox = async (app) => {
  for (const hide of [true, false]) {
    const verb = hide ? 'hide' : 'unhide';
    app.post(
      `/moderation/articles/:slug/${verb}`,
      {
        config: ROUTE,
        ...(!hide && { preValidation: bodyOptional }),
        schema: {
          tags: ['moderation'],
          operationId: hide ? 'HideArticle' : 'UnhideArticle',
          summary: hide ? 'Hide an article from everyone but its author (moderators)' : 'Show a hidden article again (moderators)',
          params: SlugParams,
          body: hide ? HideBody : UnhideBody,
          response: { 200: ArticleResponse, ...FORBIDDEN_OR_MISSING },
        },
      },
      async (request) => {
        const moderator = moderatorOf(request);
        const article = await findModeratedArticle(request.db, request.params.slug);
        mayActOn(moderator, { id: article.author_id, role: article.author_role });
        const reason = request.body.moderation?.reason ?? null;
        await setArticleModeration(request.db, moderator, article, { hide, reason }, Date.now());
        // As its author sees it: with `moderation` while hidden.
        const answer = await getArticleAnswer(request.db, { id: article.id }, article.author_id);
        if (answer === undefined) throw notFound('article');
        return answer;
      },
    );

    app.post(
      `/moderation/comments/:id/${verb}`,
      {
        config: ROUTE,
        ...(!hide && { preValidation: bodyOptional }),
        schema: {
          tags: ['moderation'],
          operationId: hide ? 'HideComment' : 'UnhideComment',
          summary: hide ? 'Hide a comment from everyone but its author (moderators)' : 'Show a hidden comment again (moderators)',
          params: CommentIdParams,
          body: hide ? HideBody : UnhideBody,
          response: { 200: CommentResponse, ...FORBIDDEN_OR_MISSING },
        },
      },
      async (request) => {
        const moderator = moderatorOf(request);
        const comment = await findModeratedComment(request.db, request.params.id);
        mayActOn(moderator, { id: comment.author_id, role: comment.author_role });
        await setCommentModeration(request.db, moderator, comment, { hide, reason: request.body.moderation?.reason ?? null }, Date.now());
        return commentAsAuthorSees(request.db, comment.id);
      },
    );
  }

  for (const suspend of [true, false]) {
    app.post(
      `/moderation/users/:username/${suspend ? 'suspend' : 'unsuspend'}`,
      {
        config: ROUTE,
        ...(!suspend && { preValidation: bodyOptional }),
        schema: {
          tags: ['moderation'],
          operationId: suspend ? 'SuspendUser' : 'UnsuspendUser',
          summary: suspend
            ? 'Suspend an account: it reads, but every write is refused until `until` or until lifted (moderators)'
            : "Lift an account's suspension (moderators)",
          params: UsernameParams,
          body: suspend ? SuspendBody : UnhideBody,
          response: { 200: ModeratedUserResponse, ...FORBIDDEN_OR_MISSING },
        },
      },
      async (request) => {
        // A rule on the request's shape: judged before the target is looked up and the roles weighed (422, 404, 403).
        const now = Date.now();
        // The suspend and unsuspend bodies (SuspendBody, UnhideBody) as one shape: unsuspend has no `until`.
        const body = request.body as { moderation?: { reason?: string; until?: string } };
        const until = body.moderation?.until === undefined ? null : Date.parse(body.moderation.until);
        if (until !== null && !(until > now)) throw unprocessable('until', 'must be in the future');
        const moderator = moderatorOf(request);
        const user = await findModeratedUser(request.db, request.params.username);
        mayActOn(moderator, user);
        await setSuspension(request.db, moderator, user, { suspend, reason: body.moderation?.reason ?? null, until }, now);
        return moderatedUser(await findModeratedUser(request.db, user.username));
      },
    );
  }

  app.put(
    '/moderation/users/:username',
    {
      config: ROUTE,
      schema: {
        tags: ['moderation'],
        operationId: 'SetUserRole',
        summary: "Set an account's role (admins)",
        description: 'An admin sets the role of an account below their own; the first admin is made with `conduit users role`.',
        params: UsernameParams,
        body: RoleBody,
        response: { 200: ModeratedUserResponse, ...FORBIDDEN_OR_MISSING },
      },
    },
    async (request) => {
      const admin = moderatorOf(request, 'admin');
      const user = await findModeratedUser(request.db, request.params.username);
      mayActOn(admin, user);
      await setRole(request.db, admin.id, user, request.body.user.role, Date.now());
      return moderatedUser(await findModeratedUser(request.db, user.username));
    },
  );

  app.get(
    '/moderation/audit-log',
    {
      config: ROUTE,
      schema: {
        tags: ['moderation'],
        operationId: 'GetAuditLog',
        summary: 'Every moderation decision, role change, scheduled publication and account purge, newest first (admins)',
        querystring: IdPageQuery,
        response: { 200: AuditLogResponse, ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => {
      moderatorOf(request, 'admin');
      const { limit, cursor } = request.query;
      return listAuditLog(request.db, { limit, before: cursor === undefined ? undefined : decodeIdCursor(cursor, 'integer') });
    },
  );
};
