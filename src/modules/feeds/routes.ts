import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { TSchema } from 'typebox';
import type { FeedConfig } from '../../config.js';
import type { Executor } from '../../db/index.js';
import { notFound } from '../../errors.js';
import { escapeMarkup } from '../../markup.js';
import { setLastModified } from '../../plugins/conditional-get.js';
import { errorResponses } from '../../schemas.js';
import { currentState } from '../articles/lifecycle.js';
import { toSummary } from '../articles/view.js';
import { type FeedDocument, type FeedEntry, toAtom, toJsonFeed, toRss } from './formats.js';
import { type FeedScope, feedArticles, findAuthor, findTag, lastRecordedWrite } from './queries.js';
import { createBodyRenderer, feedText, RENDER_BUDGET, type RenderedBody } from './render.js';
import { AtomResponse, AuthorParams, JsonFeedResponse, RssResponse, TagParams } from './schemas.js';

type FeedRow = Awaited<ReturnType<typeof feedArticles>>[number];

/** The URL's last part names the format; each is its own route, so any other ending is an unknown route (404). */
const FORMATS = {
  rss: { mediaType: 'application/rss+xml', name: 'RSS 2.0', operation: 'Rss', response: RssResponse, write: toRss },
  atom: { mediaType: 'application/atom+xml', name: 'Atom 1.0', operation: 'Atom', response: AtomResponse, write: toAtom },
  json: { mediaType: 'application/feed+json', name: 'JSON Feed 1.1', operation: 'JsonFeed', response: JsonFeedResponse, write: toJsonFeed },
} as const;

/** What a feed is of, found from its URL's parameters. */
interface ResolvedScope {
  scope: FeedScope;
  /** The feed's canonical path without its extension, built from the stored names rather than echoed from the URL. */
  path: string;
  title: string;
  description: string;
  homeUrl: string;
  author: string;
  /** A change shown even when there are no articles: the author's own name. */
  since: number;
}

type Resolver = (db: Executor, params: Record<string, string>) => Promise<ResolvedScope>;

/** Absolute links to the frontend's pages, with each value URL-encoded into its template. */
function frontendLinks(feeds: FeedConfig) {
  const page = (template: string, placeholder: string) => (value: string) =>
    `${feeds.frontendUrl}${template.replaceAll(placeholder, () => encodeURIComponent(value))}`;
  return {
    home: `${feeds.frontendUrl}/`,
    article: page(feeds.articlePath, '{slug}'),
    profile: page(feeds.profilePath, '{username}'),
    tag: page(feeds.tagPath, '{tag}'),
  };
}

/**
 * `tag:` URIs (RFC 4151) on the frontend's host name, dated with the article's creation day: the row id never
 * changes, where a permalink would change with the slug whenever the title does.
 */
const entryId = (host: string, article: { id: number; created_at: number }) =>
  `tag:${host},${new Date(article.created_at).toISOString().slice(0, 10)}:article:${article.id}`;

/**
 * Last-Modified must not be older than any change to the answer, and an article leaving a feed (deleted, or no
 * longer tagged) leaves no time behind in what the feed shows. Every such write records an event, so the newest
 * event is a time no change to the feed is later than. It is an honest time only while the outbox still holds
 * everything newer than EVENT_RETENTION: with no event that recent, older ones may have been purged, and no
 * Last-Modified is sent (the ETag still serves revalidation).
 */
function lastModified(shown: number, lastWrite: number | null, retentionMs: number, now: number): number | undefined {
  if (lastWrite === null || lastWrite < now - retentionMs) return undefined;
  return Math.max(shown, lastWrite);
}

/**
 * Each row with its rendered body: newest first while the budget lasts; an article that would overrun it gets none,
 * and is shown by its description and a link, and so are those after it, since finding out spent what was left.
 * Decided by each body's cost, which depends on the body alone, so the answer, and its ETag, do not depend on what
 * happens to be cached.
 */
function withinRenderBudget<Row>(
  rows: Row[],
  render: (row: Row, budget: number) => RenderedBody | undefined,
): Array<[Row, string | undefined]> {
  let left = RENDER_BUDGET;
  return rows.map((row) => {
    const body = left >= 0 ? render(row, left) : undefined;
    left = body === undefined ? -1 : left - body.cost;
    return [row, body?.html];
  });
}

/** What an article past the render budget shows instead of its body. */
const summaryHtml = (description: string, url: string) =>
  `<p>${escapeMarkup(feedText(description))}</p><p><a href="${escapeMarkup(url)}">Read the whole article</a></p>`;

export const feedsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { feeds, retention } = app.config;
  const links = frontendLinks(feeds);
  const host = new URL(feeds.frontendUrl).hostname;
  const renderBody = createBodyRenderer(feeds.frontendUrl);
  const origin = (request: FastifyRequest) => feeds.publicUrl ?? `${request.protocol}://${request.host}`;

  /**
   * When the row's article became public, as its answers say: a scheduled article arrives at its publishAt, with no
   * write then and before any scheduler records it.
   */
  const publishedAt = (row: FeedRow) => currentState(row, Date.now()).published_at ?? row.created_at;

  const entryOf = (row: FeedRow, html: string | undefined): FeedEntry => ({
    id: entryId(host, row),
    url: links.article(row.slug),
    title: feedText(row.title),
    summary: feedText(row.description),
    html: html ?? summaryHtml(row.description, links.article(row.slug)),
    published: publishedAt(row),
    updated: row.updated_at,
    author: { name: row.username, url: links.profile(row.username), avatar: row.image },
    tags: toSummary(row, Date.now()).tagList.map(feedText),
  });

  const serve = (path: string, what: { operation: string; summary: string; params?: TSchema }, resolve: Resolver) => {
    for (const [extension, format] of Object.entries(FORMATS)) {
      app.get(
        `${path}.${extension}`,
        {
          schema: {
            tags: ['feeds'],
            operationId: `Get${what.operation}${format.operation}`,
            summary: `${what.summary}, as ${format.name}`,
            // Outside the /api the document's other paths are relative to.
            servers: [{ url: '/', description: 'This server' }],
            ...(what.params && { params: what.params }),
            response: { 200: format.response, ...(what.params && errorResponses(404)) },
          },
        },
        async (request, reply) => {
          const resolved = await resolve(request.db, request.params as Record<string, string>);
          const rows = await feedArticles(request.db, resolved.scope);
          const lastWrite = await lastRecordedWrite(request.db);
          const shown = Math.max(resolved.since, ...rows.flatMap((row) => [row.updated_at, row.author_updated_at, publishedAt(row)]));
          const feed: FeedDocument = {
            id: resolved.homeUrl,
            title: resolved.title,
            description: resolved.description,
            homeUrl: resolved.homeUrl,
            selfUrl: `${origin(request)}${resolved.path}.${extension}`,
            updated: shown,
            author: resolved.author,
            entries: withinRenderBudget(rows, renderBody).map(([row, html]) => entryOf(row, html)),
          };
          const modified = lastModified(shown, lastWrite, retention.eventsMs, Date.now());
          if (modified !== undefined) setLastModified(reply, modified);
          return reply.type(`${format.mediaType}; charset=utf-8`).send(format.write(feed));
        },
      );
    }
  };

  serve('/feeds/articles', { operation: 'Articles', summary: 'The newest articles' }, async () => ({
    scope: { kind: 'site' },
    path: '/feeds/articles',
    title: feeds.siteName,
    description: `The newest articles on ${feeds.siteName}`,
    homeUrl: links.home,
    author: feeds.siteName,
    since: 0,
  }));

  serve(
    '/feeds/authors/:username/articles',
    { operation: 'AuthorArticles', summary: "An author's newest articles", params: AuthorParams },
    async (db, params) => {
      const author = await findAuthor(db, params.username!);
      if (author === undefined) throw notFound('profile');
      return {
        scope: { kind: 'author', authorId: author.id },
        path: `/feeds/authors/${encodeURIComponent(author.username)}/articles`,
        title: `${author.username} on ${feeds.siteName}`,
        description: `The newest articles by ${author.username} on ${feeds.siteName}`,
        homeUrl: links.profile(author.username),
        author: author.username,
        since: author.profile_updated_at,
      };
    },
  );

  serve(
    '/feeds/tags/:tag/articles',
    { operation: 'TagArticles', summary: 'The newest articles with a tag', params: TagParams },
    async (db, params) => {
      const tag = await findTag(db, params.tag!, Date.now());
      if (tag === undefined) throw notFound('tag');
      const name = feedText(tag.name);
      return {
        scope: { kind: 'tag', tagId: tag.id },
        path: `/feeds/tags/${encodeURIComponent(tag.name)}/articles`,
        title: `${name} on ${feeds.siteName}`,
        description: `The newest articles tagged ${name} on ${feeds.siteName}`,
        homeUrl: links.tag(tag.name),
        author: feeds.siteName,
        since: 0,
      };
    },
  );
};
