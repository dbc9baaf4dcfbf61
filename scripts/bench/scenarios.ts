import { randomBytes } from 'node:crypto';
import type { DatabaseConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/index.js';
import { encodeListCursor } from '../../src/modules/articles/list-cursor.js';
import { getTagsAnswerJson } from '../../src/modules/tags/queries.js';
import { DELIVERY_STREAMS, DELIVERY_WRITES_PER_SECOND } from './delivery.js';
import { type RequestSource, type RequestSpec, send } from './load.js';
import { Random } from './random.js';
import { BENCH_PASSWORD, pickEvenly, VIEWERS } from './seed-data.js';
import { COMMENTS, SENTENCES } from './words.js';

export const SCENARIO_IDS = [
  'list',
  'list-auth',
  'by-tag',
  'by-author',
  // The signed-in author's own articles in every state (GET /api/user/articles), to set beside by-author.
  'own-articles',
  'by-favorited',
  'feed',
  'article',
  // The same article reads, sent as a client revalidating its copy (If-None-Match): 304s.
  'article-304',
  'comments',
  'tags',
  'profile',
  // Many viewers and many URLs, as a site's traffic is spread: not one answer asked again and again.
  'list-many',
  'list-auth-many',
  'feed-many',
  'article-many',
  'list-urls',
  // Searches, and a page thousands deep by cursor, to compare with the first page of the plain list.
  'search-common',
  'search-rare',
  'search-multi',
  'list-cursor-deep',
  'list-offset-deep',
  'login',
  // Writes last: articles they add would otherwise change what the read scenarios after them see.
  'mixed',
  'create-article',
  'favorite',
  'events',
  // The same writes on one server, then on two: left out of --smoke unless named.
  'create-article-2x',
  'favorite-2x',
  // The mixed reads beside writes on the primary alone, then on two servers reading from a streaming replica.
  'mixed-replica',
] as const;

export type ScenarioId = (typeof SCENARIO_IDS)[number];

/** Scenarios measured on one server, then on two on the same database, and the scenario whose requests they send. */
export const TWO_INSTANCE_SCENARIOS = {
  'create-article-2x': 'create-article',
  'favorite-2x': 'favorite',
} as const satisfies Partial<Record<ScenarioId, ScenarioId>>;

type TwoInstanceId = keyof typeof TWO_INSTANCE_SCENARIOS;

export const isTwoInstance = (id: ScenarioId): id is TwoInstanceId => id in TWO_INSTANCE_SCENARIOS;

/** Scenarios that start servers of their own and send their base scenario's requests again: --smoke leaves them out unless named. */
export const isExtraServers = (id: ScenarioId): boolean => isTwoInstance(id) || id === 'mixed-replica';

/** Authors and offsets of the list-urls scenario: 2,000 URLs, each asked again only after all the others. */
const LIST_URL_AUTHORS = 20;
const LIST_URL_OFFSETS = 100;

export const SCENARIO_TITLES: Record<ScenarioId, string> = {
  list: 'GET /api/articles, anonymous',
  'list-auth': 'GET /api/articles, signed in (favorited, following per item)',
  'by-tag': 'GET /api/articles?tag=, hottest to rare tags',
  'by-author': 'GET /api/articles?author=, prolific and ordinary authors',
  'own-articles': "GET /api/user/articles, each signed-in user's own",
  'by-favorited': 'GET /api/articles?favorited=, rotating users',
  feed: 'GET /api/articles/feed, rotating users',
  article: 'GET /api/articles/:slug, hot and ordinary articles',
  'article-304': 'GET /api/articles/:slug as article, with If-None-Match of the current ETag (304 Not Modified)',
  comments: 'GET /api/articles/:slug/comments, same articles',
  tags: 'GET /api/tags',
  profile: 'GET /api/profiles/:username, anonymous',
  'list-many': 'GET /api/articles, anonymous: pages 1-10, and pages 1-3 by tag and by author',
  'list-auth-many': 'GET /api/articles as list-many, signed in as 200 viewers',
  'feed-many': 'GET /api/articles/feed, pages 1-10, 200 viewers',
  'article-many': 'GET /api/articles/:slug, 200 viewers',
  'list-urls': `GET /api/articles?author=&limit=100&offset=: ${LIST_URL_AUTHORS * LIST_URL_OFFSETS} distinct URLs, names in mixed case (memory)`,
  'search-common': 'GET /api/articles?q=, a word in most articles (ranks the newest 500 matches), whole or typed; 16 clients',
  'search-rare': 'GET /api/articles?q=, a long-tail tag name as a phrase (tens to hundreds of matches); 16 clients',
  'search-multi': 'GET /api/articles?q=, 2-3 words, phrases, exclusions, prefixes; 16 clients',
  'list-cursor-deep': 'GET /api/articles?cursor=, pages 4,000-5,000 deep at 1 M articles (the last fifth of the pages at smaller scales)',
  'list-offset-deep': 'GET /api/articles?offset=, the same pages as list-cursor-deep, by offset',
  login: 'POST /api/users/login',
  mixed: 'reads as a site gets them (lists, articles, feeds, tags; 200 viewers), alone and beside 20 and 100 writes/s',
  'create-article': 'POST /api/articles by the 200 viewers in turn, 1-3 seeded tags, unique titles',
  favorite: 'POST and DELETE /api/articles/:slug/favorite, toggles by 200 viewers on 1,000 articles',
  events: `GET /api/events: ${DELIVERY_STREAMS} live streams and a webhook endpoint per author, beside ${DELIVERY_WRITES_PER_SECOND} new articles/s; outbox-to-delivery latency`,
  'create-article-2x': 'create-article on one server, then on two on the same database, the connections split between them',
  'favorite-2x': 'favorite on one server, then on two on the same database, the connections split between them',
  'mixed-replica':
    'mixed reads beside 20 writes/s on one server on the primary, then on two reading from a streaming replica (PostgreSQL, --replica-url)',
};

/** Who and what the scenarios ask for, read from the seeded database before the server starts. */
export interface Targets {
  /** Most used first: the head is where a real site's traffic goes. */
  tags: string[];
  /** Every tag in use (all the seeded ones), most used first: what new articles are tagged with. */
  everyTag: string[];
  authors: string[];
  favoriters: string[];
  profiles: string[];
  slugs: string[];
  /** Many articles spread over all of them, each favorited and unfavorited by one viewer in the favorite scenario. */
  favoriteSlugs: string[];
  loginEmails: string[];
  /** The users whose tokens the signed-in scenarios use. */
  sessionEmails: string[];
  /** The many viewers of the *-many and mixed scenarios. */
  viewerEmails: string[];
  /** Long-tail tags: their names are the rare searches. */
  rareTags: string[];
  /** Pages thousands deep into the list of all articles, and the cursor that leads to each. */
  deepPages: { page: number; cursor: string }[];
  /**
   * `<email>\n<slug>` for every user and target article a seeded block separates (either way): that user gets 404 on
   * the article and 403 on favoriting it, as they should, so the scenarios never send them there.
   */
  separated: string[];
}

export interface Session {
  email: string;
  token: string;
}

/** The few users of the older signed-in scenarios, and the many viewers of the newer ones. */
export interface Sessions {
  few: Session[];
  viewers: Session[];
  /** The ETag of each target article as an anonymous reader gets it, for the revalidation scenario. */
  articleTags: Map<string, string>;
}

/** What an anonymous reader's copy of each target article is tagged with, asked before anything is measured. */
export async function articleTags(base: string, targets: Targets): Promise<Map<string, string>> {
  const tags = new Map<string, string>();
  for (const slug of targets.slugs) {
    const answer = await send(base, get(articlePath(slug)));
    if (answer.etag === null) throw new Error(`GET ${articlePath(slug)} answered ${answer.status} without an ETag`);
    tags.set(slug, answer.etag);
  }
  return tags;
}

export interface Scenario {
  id: ScenarioId;
  next: RequestSource;
  /** Distinct requests in the rotation: that many are sent once, before the load, to size the ceiling's answers. */
  variety: number;
  /**
   * Requests in flight, when not the run's: searches are measured within what the server takes at once (SQLite
   * queues 32 searches at its reader thread and refuses more with 503), not as a flood it refuses.
   */
  connections?: number;
  /** Writes measured beside `next` at a few steady rates (the mixed scenario). */
  writes?: RequestSource;
  /** Measured on one server, then on two on the same database (the *-2x scenarios). */
  twoInstances?: true;
  /** `next` beside `writes` on one server on the primary, then on two reading from a replica (mixed-replica). */
  replica?: true;
  /** Writes by these authors (tokens), each with a webhook endpoint, while live streams listen (the events scenario). */
  deliveryAuthors?: string[];
}

/** Writers of the events scenario: each has a webhook endpoint, and a user may have 10. */
const DELIVERY_AUTHORS = 10;

const SPREAD_TAGS = 20;
const SPREAD_AUTHORS = 20;
/** Of the spread picks, this many are simply the most popular ones, so the hottest rows are always in the mix. */
const HEAD = 5;
const HOT_ARTICLES = 20;
const ARTICLES = 100;
/** Articles the favorite toggles go to: far more than the requests in flight, so that two rarely meet on one. */
const FAVORITE_ARTICLES = 1_000;
const USERS = 20;
const PAGE_SIZE = 20;
const LIST_PAGES = 10;
const FILTERED_PAGES = 3;
/** Requests drawn per random rotation: far more than the distinct answers, so each recurs in a random order. */
const DRAWS = 4_000;
/** Any fixed seed: two runs then send the same requests in the same order. */
const SEED = 15;
const PROFILES = 50;
const LOGINS = 100;
const MAX_SIZED_REQUESTS = 25;
/** The deepest page the cursor scenario reads, and how many pages near it. */
const DEEP_PAGE_MAX = 5_000;
const DEEP_CURSORS = 50;
/** Words of the seeded bodies (words.ts SENTENCES), each in a large share of the articles. */
const COMMON_WORDS = ['query', 'index', 'latency', 'requests', 'database', 'team', 'benchmark', 'caching', 'users', 'code'];
const MULTI_WORD_SEARCHES = [
  'slow query',
  'index order columns',
  '"connection pool"',
  'caching problem -database',
  'query plan minutes',
  '"the p99" median',
  'team code -years',
  'benchmark chan',
];

const range = (first: number, last: number) => Array.from({ length: Math.max(0, last - first + 1) }, (_, k) => first + k);

/** `count` ids spread evenly over 1..last, both included: whatever rows are there, seeded or added since. */
const evenIds = (last: number, count: number) =>
  Array.from({ length: count }, (_, k) => 1 + Math.round((k * (last - 1)) / Math.max(1, count - 1)));

/** The `HEAD` most popular, then the rest of `count` spread over the long tail. */
const headAndTail = <T>(ranked: readonly T[], count: number) => [...ranked.slice(0, HEAD), ...pickEvenly(ranked.slice(HEAD), count - HEAD)];

export async function pickTargets(database: DatabaseConfig): Promise<Targets> {
  const { db, destroy } = openDatabase(database);
  try {
    // The tag list as GET /api/tags gives it: most used first.
    const { tags } = JSON.parse(await getTagsAnswerJson(db)) as { tags: string[] };
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
    const spreadOver = (count: number) =>
      db
        .selectFrom('articles')
        .select('slug')
        .where('id', 'in', evenIds(Number(last ?? 1), count))
        .orderBy('id')
        .execute();
    const spread = await spreadOver(ARTICLES - HOT_ARTICLES);
    const { count } = await db
      .selectFrom('articles')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow();
    const lastPage = Math.min(DEEP_PAGE_MAX, Math.floor(Number(count) / PAGE_SIZE));
    const deepPages: Targets['deepPages'] = [];
    for (const page of pickEvenly(range(Math.max(2, Math.ceil(lastPage * 0.8)), lastPage), DEEP_CURSORS)) {
      // The cursor the page before hands out: it names that page's last article.
      const last = await db
        .selectFrom('articles')
        .select(['listed_at', 'id'])
        .where('listed_at', 'is not', null)
        .orderBy('listed_at', 'desc')
        .orderBy('id', 'desc')
        .offset((page - 1) * PAGE_SIZE - 1)
        .limit(1)
        .executeTakeFirstOrThrow();
      deepPages.push({ page, cursor: encodeListCursor({ kind: 'time', at: Number(last.listed_at), id: last.id }) });
    }
    const favorited = await spreadOver(FAVORITE_ARTICLES);
    const targetSlugs = [...new Set([...hot, ...spread, ...favorited].map((row) => row.slug))];
    const separatedBy = (reader: 'blocker_id' | 'blocked_id', author: 'blocker_id' | 'blocked_id') =>
      db
        .selectFrom('blocks')
        .innerJoin('users', 'users.id', `blocks.${reader}`)
        .innerJoin('articles', 'articles.author_id', `blocks.${author}`)
        .select(['users.email', 'articles.slug'])
        .where('articles.slug', 'in', targetSlugs)
        .execute();
    const separated = [...(await separatedBy('blocker_id', 'blocked_id')), ...(await separatedBy('blocked_id', 'blocker_id'))];
    return {
      tags: headAndTail(tags, SPREAD_TAGS),
      everyTag: tags,
      authors: headAndTail(
        authors.map((row) => row.username),
        SPREAD_AUTHORS,
      ),
      favoriters: pickEvenly(users, USERS).map((user) => user.username),
      profiles: pickEvenly(users, PROFILES).map((user) => user.username),
      slugs: [...new Set([...hot, ...spread].map((row) => row.slug))],
      favoriteSlugs: favorited.map((row) => row.slug),
      loginEmails: pickEvenly(users, LOGINS).map((user) => user.email),
      // Offset from the other picks, so the signed-in users are not also the ones whose favorites are listed.
      sessionEmails: pickEvenly(users.slice(1), USERS).map((user) => user.email),
      viewerEmails: pickEvenly(users, VIEWERS).map((user) => user.email),
      rareTags: tags.slice(-SPREAD_TAGS),
      deepPages,
      separated: separated.map((row) => `${row.email}\n${row.slug}`),
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

/** Logins in flight at once: enough to keep argon2's thread pool busy, so 200 viewers sign in in seconds. */
const LOGINS_IN_FLIGHT = 8;

/** Tokens for the signed-in scenarios, got through the API before anything is measured. */
export async function logIn(base: string, emails: readonly string[]): Promise<Session[]> {
  const sessions: Session[] = [];
  for (let start = 0; start < emails.length; start += LOGINS_IN_FLIGHT) {
    const batch = emails.slice(start, start + LOGINS_IN_FLIGHT);
    const answers = await Promise.all(batch.map((email) => send(base, loginRequest(email))));
    for (const [k, answer] of answers.entries()) {
      const email = batch[k]!;
      if (answer.status !== 200) throw new Error(`logging in as ${email} failed: ${answer.status} ${answer.body.slice(0, 300)}`);
      sessions.push({ email, token: (JSON.parse(answer.body) as { user: { token: string } }).user.token });
    }
  }
  return sessions;
}

/** Searches in a rotation, from as many clients at once as the server queues searches for. */
const SEARCH_CONNECTIONS = 16;
const searches = (id: ScenarioId, texts: readonly string[]): Scenario => ({
  ...rotation(
    id,
    texts.map((text) => get(query('q', text))),
  ),
  connections: SEARCH_CONNECTIONS,
});

function rotation(id: ScenarioId, specs: readonly RequestSpec[]): Scenario {
  let sent = 0;
  return { id, next: () => specs[sent++ % specs.length]!, variety: Math.min(specs.length, MAX_SIZED_REQUESTS) };
}

const get = (path: string, token?: string): RequestSpec => ({ method: 'GET', path, token });
const query = (name: string, value: string) => `/api/articles?${name}=${encodeURIComponent(value)}`;
const articlePath = (slug: string) => `/api/articles/${encodeURIComponent(slug)}`;
const pageQuery = (page: number) => `limit=${PAGE_SIZE}&offset=${(page - 1) * PAGE_SIZE}`;

/**
 * Random draws over many distinct requests, fixed by the seed. A rotation of them, not a fresh draw per request,
 * so that the ceiling gets exactly the same requests in the same order.
 */
function drawn(id: ScenarioId, draw: (random: Random) => RequestSpec): Scenario {
  const random = new Random(SEED);
  return rotation(
    id,
    Array.from({ length: DRAWS }, () => draw(random)),
  );
}

/** An anonymous list path: one of pages 1-10 of all articles, or of pages 1-3 of one tag's or one author's. */
function listPath(random: Random, targets: Targets): string {
  if (random.chance(1 / 3)) return `/api/articles?${pageQuery(random.between(1, LIST_PAGES))}`;
  const [name, values] = random.chance(0.5) ? (['tag', targets.tags] as const) : (['author', targets.authors] as const);
  return `${query(name, random.pick(values))}&${pageQuery(random.between(1, FILTERED_PAGES))}`;
}

const feedPath = (random: Random) => `/api/articles/feed?${pageQuery(random.between(1, LIST_PAGES))}`;

/**
 * Reads in about the shares a site gets them: lists (anonymous and signed in) most, then single articles, feeds
 * and the tag list, from 200 viewers.
 */
function mixedRead(random: Random, targets: Targets, viewers: readonly string[], reachable: Reachable): RequestSpec {
  const share = random.next();
  const viewer = random.pick(viewers);
  if (share < 0.35) return get(listPath(random, targets));
  if (share < 0.6) return get(listPath(random, targets), viewer);
  if (share < 0.8) {
    const reader = random.chance(0.5) ? viewer : undefined;
    return get(articlePath(reachable(random, targets.slugs, reader)), reader);
  }
  if (share < 0.9) return get(feedPath(random), viewer);
  return get('/api/tags');
}

/** Favorite toggles (on, then off) and comments, by the viewers on the picked articles, in a fixed order. */
function mixedWrites(targets: Targets, viewers: readonly string[], reachable: Reachable): RequestSource {
  const random = new Random(SEED, 1);
  const writes = Array.from({ length: DRAWS }, (): RequestSpec[] => {
    const token = random.pick(viewers);
    const path = articlePath(reachable(random, targets.slugs, token));
    return [
      { method: 'POST', path: `${path}/favorite`, token },
      { method: 'DELETE', path: `${path}/favorite`, token },
      { method: 'POST', path: `${path}/comments`, token, body: { comment: { body: random.pick(COMMENTS) } } },
    ];
  }).flat();
  let sent = 0;
  return () => writes[sent++ % writes.length]!;
}

/**
 * Favorite toggles that rarely meet: a favorite moves its (user, article) row in favorites and, through the
 * triggers, the article's and the user's favorites_count, each locked until the write commits. The articles are
 * split into two halves, and pair j of each half gets its own article; the first half's pair j is favorited by
 * viewer j, the second half's by the viewer half the viewers further on. The rotation sends, for every j, the
 * first half's POST beside the second half's DELETE, then the second half's POST beside the first half's DELETE:
 * each DELETE goes out half the rotation after its POST. Requests in flight together, a few dozen neighbours in
 * the rotation, therefore touch different articles and different users: a viewer comes round again 200 requests
 * later (with 200 viewers), an article 1,000 later (with 1,000 articles). In the first pass the second half's
 * DELETEs come before their POSTs and change nothing (both are idempotent in this API); after that every request
 * toggles. A run leaves at most half the pairs favorited, and a later run on the same articles turns them off.
 */
function favoriteToggles(slugs: readonly string[], viewers: readonly string[], apart: Apart): RequestSpec[] {
  const half = slugs.length >> 1;
  const toggle = (method: 'POST' | 'DELETE', pair: number): RequestSpec | [] => {
    const second = pair >= half;
    const token = viewers[(second ? pair - half + (viewers.length >> 1) : pair) % viewers.length]!;
    // A pair a block separates would answer 403, twice: left out, as such a user would never try.
    return apart(token, slugs[pair]!) ? [] : { method, path: `${articlePath(slugs[pair]!)}/favorite`, token };
  };
  return [0, half].flatMap((posted) => {
    const deleted = half - posted;
    return Array.from({ length: half }, (_, j) => [toggle('POST', posted + j), toggle('DELETE', deleted + j)]).flat(2);
  });
}

/** Whether a seeded block separates the viewer with this token from the article (Targets.separated). */
type Apart = (token: string, slug: string) => boolean;
/** An article among `slugs` that the viewer (anonymous: undefined) can reach. */
type Reachable = (random: Random, slugs: readonly string[], token: string | undefined) => string;

function reachability(targets: Targets, sessions: Sessions): { apart: Apart; reachable: Reachable } {
  const tokenOf = new Map(sessions.viewers.map((session) => [session.email, session.token]));
  const pairs = new Set(
    targets.separated.map((pair) => {
      const [email, slug] = pair.split('\n');
      return `${tokenOf.get(email!)}\n${slug}`;
    }),
  );
  const apart: Apart = (token, slug) => pairs.has(`${token}\n${slug}`);
  const reachable: Reachable = (random, slugs, token) => {
    let slug = random.pick(slugs);
    while (token !== undefined && apart(token, slug)) slug = random.pick(slugs);
    return slug;
  };
  return { apart, reachable };
}

/**
 * Tags for one new article after another: the next 1-3 of a fixed shuffle of every tag in use, so that articles
 * created at about the same moment take different tags (a create locks its tags' rows until it commits) until
 * the shuffle comes round again: after about 25 articles at small scale (50 tags), 500 at large (1,000).
 */
function tagTaker(tags: readonly string[]): (count: number) => string[] {
  const order = new Random(SEED, 2).permutation(tags.length);
  let at = 0;
  return (count) =>
    Array.from({ length: Math.min(count, tags.length) }, () => {
      const tag = tags[order[at]!]!;
      at = (at + 1) % order.length;
      return tag;
    });
}

export function buildScenario(id: ScenarioId, targets: Targets, sessions: Sessions): Scenario {
  if (isTwoInstance(id)) return { ...buildScenario(TWO_INSTANCE_SCENARIOS[id], targets, sessions), id, twoInstances: true };
  if (id === 'mixed-replica') return { ...buildScenario('mixed', targets, sessions), id, replica: true };
  if (id === 'events') {
    const authors = sessions.viewers.slice(0, DELIVERY_AUTHORS);
    return {
      ...buildScenario('create-article', targets, { ...sessions, viewers: authors }),
      id,
      deliveryAuthors: authors.map((a) => a.token),
    };
  }
  const tokens = sessions.few.map((session) => session.token);
  const viewers = sessions.viewers.map((session) => session.token);
  const { apart, reachable } = reachability(targets, sessions);
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
    case 'own-articles':
      return rotation(
        id,
        viewers.map((token) => get('/api/user/articles', token)),
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
    case 'article-304':
      return rotation(
        id,
        targets.slugs.map((slug) => ({ ...get(articlePath(slug)), ifNoneMatch: sessions.articleTags.get(slug) })),
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
    case 'list-many':
      return drawn(id, (random) => get(listPath(random, targets)));
    case 'list-auth-many':
      return drawn(id, (random) => get(listPath(random, targets), random.pick(viewers)));
    case 'feed-many':
      return drawn(id, (random) => get(feedPath(random), random.pick(viewers)));
    case 'article-many':
      return drawn(id, (random) => {
        const viewer = random.pick(viewers);
        return get(articlePath(reachable(random, targets.slugs, viewer)), viewer);
      });
    case 'list-urls': {
      // A name is looked up case-insensitively: every spelling is the same author, and a distinct URL.
      const random = new Random(SEED, 3);
      const spelled = (name: string) => [...name].map((c) => (random.chance(0.5) ? c.toUpperCase() : c.toLowerCase())).join('');
      return rotation(
        id,
        pickEvenly(targets.authors, LIST_URL_AUTHORS).flatMap((author) =>
          Array.from({ length: LIST_URL_OFFSETS }, (_, offset) => get(`${query('author', spelled(author))}&limit=100&offset=${offset}`)),
        ),
      );
    }
    case 'search-common':
      // Whole words, and the same words as typed so far (a prefix).
      return searches(
        id,
        COMMON_WORDS.flatMap((word) => [word, word.slice(0, 4)]),
      );
    case 'search-rare':
      return searches(
        id,
        targets.rareTags.map((tag) => `"${tag}"`),
      );
    case 'search-multi':
      return searches(id, MULTI_WORD_SEARCHES);
    case 'list-cursor-deep':
      return rotation(
        id,
        targets.deepPages.map(({ cursor }) => get(query('cursor', cursor))),
      );
    case 'list-offset-deep':
      return rotation(
        id,
        targets.deepPages.map(({ page }) => get(`/api/articles?${pageQuery(page)}`)),
      );
    case 'mixed':
      return {
        ...drawn(id, (random) => mixedRead(random, targets, viewers, reachable)),
        writes: mixedWrites(targets, viewers, reachable),
      };
    case 'login':
      return rotation(id, targets.loginEmails.map(loginRequest));
    case 'favorite':
      return rotation(id, favoriteToggles(targets.favoriteSlugs, viewers, apart));
    case 'create-article': {
      // Unique per run too: with --reuse, earlier runs' articles are still there.
      const run = randomBytes(3).toString('hex');
      const takeTags = tagTaker(targets.everyTag);
      let created = 0;
      const next = (): RequestSpec => {
        created++;
        const tagList = takeTags(1 + (created % 3));
        return {
          method: 'POST',
          path: '/api/articles',
          // The 200 viewers in turn: each new article moves its author's count, and a site's authors rarely
          // publish twice at the same moment.
          token: viewers[created % viewers.length],
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
