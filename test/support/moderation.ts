import type { FastifyInstance } from 'fastify';
import type { Role } from '../../src/db/schema.js';
import { findModeratedUser, setRole } from '../../src/modules/moderation/actions.js';
import { type ApiResponse, call, type TestUser } from './client.js';

/** The one refusal of every moderation route (CONTRACT.md, Moderation). */
export const MODERATION_FORBIDDEN = { errors: { moderation: ['forbidden'] } };

/**
 * Gives the account a role as `conduit users role` does (the same code, audited with the system as actor), without a
 * process of its own: the CLI itself is tested once, in moderation.test.ts.
 */
export async function grantRole(app: FastifyInstance, user: Pick<TestUser, 'username'>, role: Role): Promise<void> {
  await setRole(app.db, null, await findModeratedUser(app.db, user.username), role, Date.now());
}

type Verb = 'hide' | 'unhide' | 'suspend' | 'unsuspend';

/**
 * A moderation route: `target` is `articles/<slug>`, `comments/<id>` or `users/<username>`. `reason` null sends none
 * (allowed to unhide and unsuspend).
 */
export function moderate(
  app: FastifyInstance,
  token: string | undefined,
  target: string,
  verb: Verb,
  reason: string | null = 'Breaks rule 1',
  extra: Record<string, unknown> = {},
): Promise<ApiResponse> {
  return call(app, 'POST', `/api/moderation/${target}/${verb}`, {
    token,
    body: { moderation: { ...(reason !== null && { reason }), ...extra } },
  });
}

/** The article's author hiding or showing a comment on it. */
export function authorModerates(
  app: FastifyInstance,
  token: string,
  slug: string,
  commentId: number,
  verb: 'hide' | 'unhide',
  reason = 'Off topic',
) {
  return call(app, 'POST', `/api/articles/${slug}/comments/${commentId}/${verb}`, {
    token,
    body: { moderation: verb === 'hide' ? { reason } : {} },
  });
}

/** PUT /api/moderation/users/:username. */
export const putRole = (app: FastifyInstance, token: string | undefined, username: string, role: Role) =>
  call(app, 'PUT', `/api/moderation/users/${username}`, { token, body: { user: { role } } });

/** The `moderation` notifications of the account, newest first, as its notifications list shows them. */
export async function moderationNotices(app: FastifyInstance, token: string): Promise<Array<Record<string, any>>> {
  const response = await call(app, 'GET', '/api/notifications?limit=100', { token });
  if (response.status !== 200) throw new Error(`notifications: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.notifications.filter((notification: { kind: string }) => notification.kind === 'moderation');
}

export interface AuditEntry {
  id: number;
  actor: string;
  action: string;
  target: { type: string; id: number };
  reason: string | null;
  createdAt: string;
}

/** Every audit log entry newer than `after` (an entry id), newest first, read page by page with `limit`. */
export async function auditEntriesAfter(app: FastifyInstance, adminToken: string, after: number, limit = 100): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor === null ? `?limit=${limit}` : `?limit=${limit}&cursor=${encodeURIComponent(cursor)}`;
    const response = await call(app, 'GET', `/api/moderation/audit-log${query}`, { token: adminToken });
    if (response.status !== 200) throw new Error(`audit log: ${response.status} ${JSON.stringify(response.body)}`);
    entries.push(...response.body.entries);
    cursor = response.body.nextCursor;
    if (response.body.entries.some((entry: AuditEntry) => entry.id <= after)) break;
  } while (cursor !== null);
  return entries.filter((entry) => entry.id > after);
}

/** The id of the newest audit log entry (0 when there is none): where a test's own entries start. */
export async function lastAuditId(app: FastifyInstance): Promise<number> {
  const row = await app.db
    .selectFrom('audit_log')
    .select((eb) => eb.fn.max('id').as('id'))
    .executeTakeFirst();
  return Number(row?.id ?? 0);
}

/** An article as a test knows it, with what finds it: a tag of its own and a word in its body alone. */
export interface Traceable {
  slug: string;
  tag: string;
  word: string;
}

const FEED_FORMATS = ['rss', 'atom', 'json'] as const;

/**
 * Everywhere an article can be met by someone other than its author, and what each place says of it: the article
 * and its comments (status codes), each list (whether it is in it, and its count), the tags, the feed documents.
 * `follower` follows the author (for the feed); `favoriter` favorited the article.
 */
export async function footprint(
  app: FastifyInstance,
  article: Traceable,
  people: { author: string; follower: TestUser; favoriter: TestUser; stranger: TestUser },
) {
  const list = async (url: string, token?: string) => {
    const { status, body } = await call(app, 'GET', url, { token });
    if (status !== 200) throw new Error(`${url}: ${status} ${JSON.stringify(body)}`);
    return { listed: body.articles.some((item: { slug: string }) => item.slug === article.slug), count: body.articlesCount as number };
  };
  const status = async (url: string, token?: string) => (await call(app, 'GET', url, { token })).status;
  const tags = await call(app, 'GET', '/api/tags');
  const feeds: Record<string, boolean> = {};
  for (const format of FEED_FORMATS) {
    for (const path of ['/feeds/articles', `/feeds/authors/${people.author}/articles`, `/feeds/tags/${article.tag}/articles`]) {
      const response = await app.inject({ method: 'GET', url: `${path}.${format}` });
      feeds[`${path}.${format}`] = response.statusCode === 200 && response.body.includes(article.slug);
    }
  }
  return {
    article: await status(`/api/articles/${article.slug}`),
    articleSignedIn: await status(`/api/articles/${article.slug}`, people.stranger.token),
    comments: await status(`/api/articles/${article.slug}/comments`),
    all: await list('/api/articles?limit=100'),
    byTag: await list(`/api/articles?tag=${article.tag}`),
    byAuthor: await list(`/api/articles?author=${people.author}`, people.stranger.token),
    favorited: await list(`/api/articles?favorited=${people.favoriter.username}`),
    feed: await list('/api/articles/feed', people.follower.token),
    search: await list(`/api/articles?q=${article.word}`),
    tagListed: tags.body.tags.includes(article.tag),
    feeds,
  };
}
