import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Static } from 'typebox';
import { isForeignKeyViolation } from '../../db/constraints.js';
import { notFound, rateLimited, unprocessable } from '../../errors.js';
import { errorResponses, IdPageQuery } from '../../schemas.js';
import { SlugParams } from '../articles/schemas.js';
import { existingArticleRef } from '../articles/write.js';
import { CommentParams } from '../comments/schemas.js';
import { moderatorOf } from '../moderation/roles.js';
import { findProfile } from '../profiles/queries.js';
import { UsernameParams } from '../profiles/schemas.js';
import { signedIn } from '../users/auth.js';
import { appealDecision, listDecisions } from './decisions.js';
import { REPORT_LIMITS, ReportLimitReached } from './limits.js';
import { decideReport, type FiledTarget, fileReport, findVisibleComment, listQueue } from './queries.js';
import {
  AppealBody,
  DecidedReportResponse,
  DecisionListResponse,
  DecisionParams,
  DecisionResponse,
  NewReportBody,
  QueueQuery,
  QueueResponse,
  ReportParams,
  ReportResponse,
  ResolutionBody,
} from './schemas.js';

const TAGS = ['moderation'];

const REPORT_DESCRIPTION =
  "201 with the new report; 200 with the same report while the caller's report on this target is still open. The " +
  'reported account is never told who reported. Reporting yourself or your own content is 422. Each account files ' +
  `at most ${REPORT_LIMITS.PER_HOUR} reports an hour and keeps at most ${REPORT_LIMITS.OPEN} open; one with ` +
  `${REPORT_LIMITS.DISMISSED_OF} or more of its last ${REPORT_LIMITS.JUDGED} decided reports dismissed files at most ` +
  `${REPORT_LIMITS.WHEN_DISMISSED} a day. Past a limit: 429 with Retry-After.`;

const reportSchema = <P>(params: P, operationId: string, summary: string) => ({
  tags: TAGS,
  operationId,
  summary,
  description: REPORT_DESCRIPTION,
  params,
  body: NewReportBody,
  response: { 200: ReportResponse, 201: ReportResponse, ...errorResponses(401, 404, 422, 429) },
});

/** The shared half of the three report routes, once the target is found as the reporter may see it. */
async function file(
  request: FastifyRequest,
  reply: FastifyReply,
  target: FiledTarget,
  { reason, message }: Static<typeof NewReportBody>['report'],
) {
  const reporter = signedIn(request).account;
  if (target.subjectId === reporter.id) throw unprocessable('report', 'cannot be about yourself or your own content');
  try {
    const { created, report } = await fileReport(
      request.db,
      reporter.id,
      target,
      { reason, message: message?.trim() ? message : null },
      Date.now(),
    );
    return reply.code(created ? 201 : 200).send({ report });
  } catch (error) {
    if (error instanceof ReportLimitReached) {
      reply.header('retry-after', Math.max(1, Math.ceil(error.retryAfterMs / 1000)));
      throw rateLimited();
    }
    // The target was deleted between the lookup and the insert.
    if (isForeignKeyViolation(error)) throw notFound(target.type);
    throw error;
  }
}

const decideSchema = (operationId: string, summary: string) => ({
  tags: TAGS,
  operationId,
  summary,
  description:
    'Moderators only, and not on a report about an account of equal or higher role (403). The reporter is told the ' +
    'outcome with the note; an open report only (409 once decided).',
  params: ReportParams,
  body: ResolutionBody,
  response: { 200: DecidedReportResponse, ...errorResponses(401, 403, 404, 409, 422) },
});

export const reportsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/articles/:slug/report',
    { config: { auth: 'required' }, schema: reportSchema(SlugParams, 'ReportArticle', 'Report an article to the moderators') },
    async (request, reply) => {
      const article = await existingArticleRef(request.db, request.params.slug, signedIn(request).account.id);
      const target = { type: 'article', subjectId: article.author_id, articleId: article.id, commentId: null } as const;
      return file(request, reply, target, request.body.report);
    },
  );

  app.post(
    '/articles/:slug/comments/:id/report',
    { config: { auth: 'required' }, schema: reportSchema(CommentParams, 'ReportArticleComment', 'Report a comment to the moderators') },
    async (request, reply) => {
      const viewer = signedIn(request).account.id;
      const article = await existingArticleRef(request.db, request.params.slug, viewer);
      const comment = await findVisibleComment(request.db, article, request.params.id, viewer);
      if (comment === undefined) throw notFound('comment');
      const target = { type: 'comment', subjectId: comment.author_id, articleId: null, commentId: comment.id } as const;
      return file(request, reply, target, request.body.report);
    },
  );

  app.post(
    '/profiles/:username/report',
    { config: { auth: 'required' }, schema: reportSchema(UsernameParams, 'ReportProfile', 'Report a user to the moderators') },
    async (request, reply) => {
      const profile = await findProfile(request.db, request.params.username, signedIn(request).account.id);
      if (profile === undefined) throw notFound('profile');
      const target = { type: 'profile', subjectId: profile.id, articleId: null, commentId: null } as const;
      return file(request, reply, target, request.body.report);
    },
  );

  app.get(
    '/moderation/reports',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'GetModerationReports',
        summary: "The moderators' queue of reports and appeals",
        description:
          'Moderators only. Newest first, or most-reported first (open reports). An appeal is an entry with `reason` ' +
          '`appeal`, the appellant as `reporter`, and the contested decision in `appeal`.',
        querystring: QueueQuery,
        response: { 200: QueueResponse, ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => listQueue(request.db, moderatorOf(request).id, request.query),
  );

  for (const [outcome, verb, operationId, summary] of [
    ['resolved', 'resolve', 'ResolveModerationReport', 'Resolve a report (it was right) or grant an appeal'],
    ['dismissed', 'dismiss', 'DismissModerationReport', 'Dismiss a report or an appeal'],
  ] as const) {
    app.post(
      `/moderation/reports/:id/${verb}`,
      { config: { auth: 'required' }, schema: decideSchema(operationId, summary) },
      async (request) => {
        const moderator = moderatorOf(request);
        const note = request.body.resolution.note ?? null;
        return { report: await decideReport(request.db, moderator, request.params.id, outcome, note, Date.now()) };
      },
    );
  }

  app.get(
    '/user/moderation',
    {
      config: { auth: 'required' },
      schema: {
        tags: TAGS,
        operationId: 'GetCurrentUserModeration',
        summary: 'The moderation decisions about you, newest first',
        description: 'Hides and suspensions of yours, and the outcomes of your reports and appeals. Never who reported you.',
        querystring: IdPageQuery,
        response: { 200: DecisionListResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => listDecisions(request.db, signedIn(request).account.id, request.query),
  );

  app.post(
    '/user/moderation/:id/appeal',
    {
      // Suspension is among the decisions a user appeals.
      config: { auth: 'required', whileSuspended: true },
      schema: {
        tags: TAGS,
        operationId: 'AppealModerationDecision',
        summary: 'Appeal a decision about you, once',
        description:
          "Puts the appeal in the moderators' queue and answers the decision with its appeal. A second appeal of the " +
          'same decision is 409; a decision about your own report (its outcome) is not appealable (422).',
        params: DecisionParams,
        body: AppealBody,
        response: { 201: DecisionResponse, ...errorResponses(401, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const answer = await appealDecision(
        request.db,
        signedIn(request).account.id,
        request.params.id,
        request.body.appeal.message,
        Date.now(),
      );
      return reply.code(201).send(answer);
    },
  );
};
