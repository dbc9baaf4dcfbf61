import { randomBytes } from 'node:crypto';
import type { DatabaseConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/index.js';
import { type RequestSource, type RequestSpec, send } from './load.js';
import { BENCH_PASSWORD } from './seed-data.js';
import { SENTENCES } from './words.js';

export const SCENARIO_IDS = [
  'list',
  'list-auth',
  'by-tag',
  'by-author',
  'by-favorited',
  'feed',
  'article',
  'comments',
  'tags',
  'profile',
  'login',
  // Writes last: articles they add would otherwise change what the read scenarios after them see.
  'create-article',
  'favorite',
] as const;

export type ScenarioId = (typeof SCENARIO_IDS)[number];

export const SCENARIO_TITLES: Record<ScenarioId, string> = {
  list: 'GET /api/articles, anonymous',
  'list-auth': 'GET /api/articles, signed in (favorited, following per item)',
  'by-tag': 'GET /api/articles?tag=, hottest to rare tags',
  'by-author': 'GET /api/articles?author=, prolific and ordinary authors',
  'by-favorited': 'GET /api/articles?favorited=, rotating users',
  feed: 'GET /api/articles/feed, rotating users',
  article: 'GET /api/articles/:slug, hot and ordinary articles',
  comments: 'GET /api/articles/:slug/comments, same articles',
  tags: 'GET /api/tags',
  profile: 'GET /api/profiles/:username, anonymous',
  login: 'POST /api/users/login',
  'create-article': 'POST /api/articles, 1-3 tags, unique titles',
  favorite: 'POST and DELETE /api/articles/:slug/favorite, alternating',
};

/** Who and what the scenarios ask for, read from the seeded database before the server starts. */
export interface Targets {
  /** Most used first: the head is where a real site's traffic goes. */
  tags: string[];
  authors: string[];
  favoriters: string[];
  profiles: string[];
  slugs: string[];
  loginEmails: string[];
  /** The users whose tokens the signed-in scenarios use. */
  sessionEmails: string[];
}

export interface Session {
  email: string;
  token: string;
}

export interface Scenario {
  id: ScenarioId;
  next: RequestSource;
  /** Distinct requests in the rotation: that many are sent once, before the load, to size the ceiling's answers. */
  variety: number;
}

const SPREAD_TAGS = 20;
const SPREAD_AUTHORS = 20;
/** Of the spread picks, this many are simply the most popular ones, so the hottest rows are always in the mix. */
const HEAD = 5;
const HOT_ARTICLES = 20;
const ARTICLES = 100;
const USERS = 20;
const PROFILES = 50;
const LOGINS = 100;
const MAX_SIZED_REQUESTS = 25;

/** `count` items spread evenly over `items`, the first and the last included. */
function pickEvenly<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  return Array.from({ length: count }, (_, k) => items[Math.round((k * (items.length - 1)) / (count - 1))]!);
}

/** The `HEAD` most popular, then the rest of `count` spread over the long tail. */
const headAndTail = <T>(ranked: readonly T[], count: number) => [...ranked.slice(0, HEAD), ...pickEvenly(ranked.slice(HEAD), count - HEAD)];

export async function pickTargets(database: DatabaseConfig): Promise<Targets> {
  const { db, destroy } = openDatabase(database);
  try {
    const tags = await db
      .selectFrom('tags')
      .select('name')
      .where('article_count', '>', 0)
      .orderBy('article_count', 'desc')
      .orderBy('name')
      .execute();
    const authors = await db
      .selectFrom('users')
      .select('username')
      .where('articles_count', '>', 0)
      .orderBy('articles_count', 'desc')
      .orderBy('id')
      .execute();
    const users = await db.selectFrom('users').select(['username', 'email']).orderBy('id').execute();
    const hot = await db
      .selectFrom('articles')
      .select('slug')
      .orderBy('favorites_count', 'desc')
      .orderBy('id')
      .limit(HOT_ARTICLES)
      .execute();
    const { last } = await db
      .selectFrom('articles')
      .select((eb) => eb.fn.max('id').as('last'))
      .executeTakeFirstOrThrow();
    const everyId = { length: ARTICLES - HOT_ARTICLES };
    const spreadIds = Array.from(everyId, (_, k) => 1 + Math.round((k * (Number(last ?? 1) - 1)) / (everyId.length - 1)));
    const spread = await db.selectFrom('articles').select('slug').where('id', 'in', spreadIds).orderBy('id').execute();
    return {
      tags: headAndTail(
        tags.map((row) => row.name),
        SPREAD_TAGS,
      ),
      authors: headAndTail(
        authors.map((row) => row.username),
        SPREAD_AUTHORS,
      ),
      favoriters: pickEvenly(users, USERS).map((user) => user.username),
      profiles: pickEvenly(users, PROFILES).map((user) => user.username),
      slugs: [...new Set([...hot, ...spread].map((row) => row.slug))],
      loginEmails: pickEvenly(users, LOGINS).map((user) => user.email),
      // Offset from the other picks, so the signed-in users are not also the ones whose favorites are listed.
      sessionEmails: pickEvenly(users.slice(1), USERS).map((user) => user.email),
    };
  } finally {
    await destroy();
  }
}

const loginRequest = (email: string): RequestSpec => ({
  method: 'POST',
  path: '/api/users/login',
  body: { user: { email, password: BENCH_PASSWORD } },
});

/** Tokens for the signed-in scenarios, got through the API before anything is measured. */
export async function logIn(base: string, emails: readonly string[]): Promise<Session[]> {
  const sessions: Session[] = [];
  for (const email of emails) {
    const answer = await send(base, loginRequest(email));
    if (answer.status !== 200) throw new Error(`logging in as ${email} failed: ${answer.status} ${answer.body.slice(0, 300)}`);
    sessions.push({ email, token: (JSON.parse(answer.body) as { user: { token: string } }).user.token });
  }
  return sessions;
}

function rotation(id: ScenarioId, specs: readonly RequestSpec[]): Scenario {
  let sent = 0;
  return { id, next: () => specs[sent++ % specs.length]!, variety: Math.min(specs.length, MAX_SIZED_REQUESTS) };
}

const get = (path: string, token?: string): RequestSpec => ({ method: 'GET', path, token });
const query = (name: string, value: string) => `/api/articles?${name}=${encodeURIComponent(value)}`;
const articlePath = (slug: string) => `/api/articles/${encodeURIComponent(slug)}`;

export function buildScenario(id: ScenarioId, targets: Targets, sessions: readonly Session[]): Scenario {
  const tokens = sessions.map((session) => session.token);
  switch (id) {
    case 'list':
      return rotation(id, [get('/api/articles')]);
    case 'list-auth':
      return rotation(
        id,
        tokens.map((token) => get('/api/articles', token)),
      );
    case 'by-tag':
      return rotation(
        id,
        targets.tags.map((tag) => get(query('tag', tag))),
      );
    case 'by-author':
      return rotation(
        id,
        targets.authors.map((author) => get(query('author', author))),
      );
    case 'by-favorited':
      return rotation(
        id,
        targets.favoriters.map((user) => get(query('favorited', user))),
      );
    case 'feed':
      return rotation(
        id,
        tokens.map((token) => get('/api/articles/feed', token)),
      );
    case 'article':
      return rotation(
        id,
        targets.slugs.map((slug) => get(articlePath(slug))),
      );
    case 'comments':
      return rotation(
        id,
        targets.slugs.map((slug) => get(`${articlePath(slug)}/comments`)),
      );
    case 'tags':
      return rotation(id, [get('/api/tags')]);
    case 'profile':
      return rotation(
        id,
        targets.profiles.map((username) => get(`/api/profiles/${encodeURIComponent(username)}`)),
      );
    case 'login':
      return rotation(id, targets.loginEmails.map(loginRequest));
    case 'favorite':
      // Both are idempotent in this API, so connections that interleave on one pair still get 200s.
      return rotation(
        id,
        targets.slugs.flatMap((slug, i): RequestSpec[] => {
          const token = tokens[i % tokens.length]!;
          return [
            { method: 'POST', path: `${articlePath(slug)}/favorite`, token },
            { method: 'DELETE', path: `${articlePath(slug)}/favorite`, token },
          ];
        }),
      );
    case 'create-article': {
      // Unique per run too: with --reuse, earlier runs' articles are still there.
      const run = randomBytes(3).toString('hex');
      let created = 0;
      const next = (): RequestSpec => {
        created++;
        const tagList = Array.from({ length: 1 + (created % 3) }, (_, k) => targets.tags[(created + k) % targets.tags.length]!);
        return {
          method: 'POST',
          path: '/api/articles',
          token: tokens[created % tokens.length],
          body: {
            article: {
              title: `Benchmark notes ${run} number ${created}`,
              description: SENTENCES[created % SENTENCES.length],
              body: Array.from({ length: 6 }, (_, k) => SENTENCES[(created + k) % SENTENCES.length]).join(' '),
              tagList,
            },
          },
        };
      };
      return { id, next, variety: 3 };
    }
  }
}
