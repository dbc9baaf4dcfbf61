import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Record<string, unknown>;
}

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** One request through app.inject(); JSON in, parsed JSON out (undefined for an empty body). */
export async function call<T = any>(
  app: FastifyInstance,
  method: Method,
  url: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Token ${options.token}`;
  const response = await app.inject({
    method,
    url,
    headers,
    ...(options.body !== undefined && { payload: options.body as object }),
  });
  const text = response.body;
  return { status: response.statusCode, body: text === '' ? undefined : JSON.parse(text), headers: response.headers };
}

/** The keys of an article in a list, sorted: RealWorld's, with the lifecycle fields (CONTRACT.md, Lifecycle). */
export const SUMMARY_KEYS = [
  'author',
  'createdAt',
  'description',
  'favorited',
  'favoritesCount',
  'publishAt',
  'publishedAt',
  'slug',
  'status',
  'tagList',
  'title',
  'updatedAt',
];
/** A single article's keys, sorted: a list item's and its body. */
export const ARTICLE_KEYS = [...SUMMARY_KEYS, 'body'].sort();

export const unique = (prefix = 'u') => `${prefix}${randomBytes(5).toString('hex')}`;

export interface TestUser {
  username: string;
  email: string;
  password: string;
  token: string;
}

export async function registerUser(app: FastifyInstance, prefix = 'user'): Promise<TestUser> {
  const username = unique(prefix);
  const user = { username, email: `${username}@example.com`, password: 'password123' };
  const response = await call(app, 'POST', '/api/users', { body: { user } });
  if (response.status !== 201) throw new Error(`register failed: ${response.status} ${JSON.stringify(response.body)}`);
  return { ...user, token: response.body.user.token };
}

export async function createArticle(
  app: FastifyInstance,
  token: string,
  article: Partial<{ title: string; description: string; body: string; tagList: string[] }> = {},
) {
  const response = await call(app, 'POST', '/api/articles', {
    token,
    body: { article: { title: unique('Title '), description: 'About it', body: 'The body', ...article } },
  });
  if (response.status !== 201) throw new Error(`create article failed: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.article;
}

/** The answer's body when it has the expected status; otherwise fails with what came instead. */
function expectStatus<T>(response: ApiResponse<T>, status: number, what: string): T {
  if (response.status !== status) throw new Error(`${what} failed: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

/** Follows `username`, or unfollows with `following` false. */
export async function setFollowing(app: FastifyInstance, token: string, username: string, following = true) {
  const response = await call(app, following ? 'POST' : 'DELETE', `/api/profiles/${username}/follow`, { token });
  return expectStatus(response, 200, following ? 'follow' : 'unfollow').profile;
}

/** Favorites the article, or unfavorites it with `favorite` false. */
export async function setFavorite(app: FastifyInstance, token: string, slug: string, favorite = true) {
  const response = await call(app, favorite ? 'POST' : 'DELETE', `/api/articles/${slug}/favorite`, { token });
  return expectStatus(response, 200, favorite ? 'favorite' : 'unfavorite').article;
}

export async function addComment(app: FastifyInstance, token: string, slug: string, body = unique('A comment ')) {
  const response = await call(app, 'POST', `/api/articles/${slug}/comments`, { token, body: { comment: { body } } });
  return expectStatus(response, 201, 'comment').comment;
}

/** The user's row id, which the API never shows, for checks on the tables. */
export async function userIdOf(app: FastifyInstance, user: Pick<TestUser, 'username'>): Promise<number> {
  return (await app.db.selectFrom('users').select('id').where('username', '=', user.username).executeTakeFirstOrThrow()).id;
}

/** The article's row id, which the API never shows (the audit log names targets by id). */
export async function articleIdOf(app: FastifyInstance, slug: string): Promise<number> {
  return Number((await app.db.selectFrom('articles').select('id').where('slug', '=', slug).executeTakeFirstOrThrow()).id);
}
