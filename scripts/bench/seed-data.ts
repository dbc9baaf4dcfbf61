import { identityKey, lookingUnlikeAny, usernameKey, usernameSkeleton } from '../../src/identity.js';
import { slugify } from '../../src/modules/articles/slug.js';
import { Random, Zipf } from './random.js';
import * as words from './words.js';

export interface Scale {
  users: number;
  articles: number;
  tags: number;
  followsPerUser: number;
  favoritesPerUser: number;
  comments: number;
  /**
   * Blocks and mutes, half each, between the signed-in viewers of the scenarios: every one of them then screens
   * someone, so that their lists, feeds and articles pay the screening (profiles/blocks.ts) as such users do.
   */
  screenings: number;
}

export const SCALES = {
  small: { users: 200, articles: 2_000, tags: 50, followsPerUser: 10, favoritesPerUser: 10, comments: 2_000, screenings: 1_000 },
  large: {
    users: 100_000,
    articles: 1_000_000,
    tags: 1_000,
    followsPerUser: 20,
    favoritesPerUser: 20,
    comments: 1_000_000,
    screenings: 1_000,
  },
} as const satisfies Record<string, Scale>;

export type ScaleName = keyof typeof SCALES;

/** Change it whenever the generated rows change, so that `--reuse` reseeds databases made by older code. */
export const SEED_VERSION = 2;

/** Every seeded account's password: the bench logs in with it. */
export const BENCH_PASSWORD = 'bench-password-2024';

/**
 * GET /api/articles/:slug/comments has no pagination in the RealWorld API: every comment of the article comes
 * back in one response. Real sites cap or paginate threads; uncapped, the skew would give the hottest article
 * tens of thousands of comments and the scenario would measure one multi-megabyte response.
 */
export const MAX_COMMENTS_PER_ARTICLE = 100;

const SEED = 20_240_601;
const MAX_TAGS_PER_ARTICLE = 5;
const DAY_MS = 86_400_000;
/** A fixed end rather than now: two runs on different days still write byte-identical rows. */
const HISTORY_END = Date.UTC(2025, 5, 1);
const HISTORY_START = HISTORY_END - 730 * DAY_MS;
/** Accounts exist before the first article, registered over the three months before it. */
const SIGNUP_START = HISTORY_START - 90 * DAY_MS;

/** One independent random sequence per concern: changing how one table is written leaves the others as they were. */
enum Stream {
  Plan,
  Users,
  Articles,
  Follows,
  Favorites,
  Comments,
  Screenings,
}

/** The signed-in viewers of the scenarios that have many: the users `pickEvenly` takes from all of them in id order. */
export const VIEWERS = 200;

/** `count` items spread evenly over `items`, the first and the last included. */
export function pickEvenly<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  return Array.from({ length: count }, (_, k) => items[Math.round((k * (items.length - 1)) / (count - 1))]!);
}

/**
 * Who wrote, tagged, followed, favorited and commented what: the shape of the data, as numbers. It is built
 * first because the counter columns (articles_count, favorites_count, article_count) are written with their rows
 * and must equal the link rows written later. Indices are 0-based; database ids are index + 1.
 */
export interface Plan {
  scale: Scale;
  articleAuthor: Int32Array;
  articleCreated: Float64Array;
  /** Article i's tags are articleTags[articleTagStart[i] .. articleTagStart[i + 1]). */
  articleTagStart: Int32Array;
  articleTags: Int32Array;
  /** User u follows follows[u * followsPerUser ..], ascending. */
  follows: Int32Array;
  /** User u favorited favorites[u * favoritesPerUser ..], ascending. */
  favorites: Int32Array;
  /** Comments in creation order, so that ids and timestamps rise together as they do on a live site. */
  commentArticle: Int32Array;
  commentAuthor: Int32Array;
  commentCreated: Float64Array;
  /** Block i is blocks[2i] blocking blocks[2i + 1]; mutes likewise: distinct pairs of two different viewers. */
  blocks: Int32Array;
  mutes: Int32Array;
  userArticles: Int32Array;
  articleFavorites: Int32Array;
  tagArticles: Int32Array;
}

function checkScale(scale: Scale): void {
  if (scale.followsPerUser >= scale.users) throw new Error('each user must have enough other users to follow');
  if (scale.favoritesPerUser > scale.articles) throw new Error('each user must have enough articles to favorite');
  if (scale.tags < MAX_TAGS_PER_ARTICLE) throw new Error(`at least ${MAX_TAGS_PER_ARTICLE} tags are needed`);
  if (scale.comments > scale.articles * MAX_COMMENTS_PER_ARTICLE) throw new Error('too many comments for the per-article cap');
}

/** Fills `out[from .. from + count)` with distinct draws, none equal to `excluded`, then sorts them. */
function drawDistinct(out: Int32Array, from: number, count: number, draw: () => number, excluded = -1): void {
  const taken = (value: number, filled: number) => {
    for (let i = from; i < from + filled; i++) if (out[i] === value) return true;
    return false;
  };
  for (let filled = 0; filled < count; filled++) {
    let value: number;
    do value = draw();
    while (value === excluded || taken(value, filled));
    out[from + filled] = value;
  }
  out.subarray(from, from + count).sort();
}

export function buildPlan(scale: Scale): Plan {
  checkScale(scale);
  const random = new Random(SEED, Stream.Plan);
  // Popularity rank -> row, so that the popular users and articles are scattered over the id range.
  const userByRank = random.permutation(scale.users);
  const articleByRank = random.permutation(scale.articles);
  const userPopularity = new Zipf(scale.users);
  const articlePopularity = new Zipf(scale.articles);
  const tagPopularity = new Zipf(scale.tags);
  const popularUser = () => userByRank[userPopularity.draw(random)]!;
  const popularArticle = () => articleByRank[articlePopularity.draw(random)]!;

  const userArticles = new Int32Array(scale.users);
  const articleAuthor = new Int32Array(scale.articles);
  const articleCreated = new Float64Array(scale.articles);
  const articleTagStart = new Int32Array(scale.articles + 1);
  const tagBuffer = new Int32Array(scale.articles * MAX_TAGS_PER_ARTICLE);
  const tagArticles = new Int32Array(scale.tags);
  const spacing = (HISTORY_END - HISTORY_START) / scale.articles;
  let tagCount = 0;
  for (let article = 0; article < scale.articles; article++) {
    // The users people follow most are also the ones who write most.
    const author = popularUser();
    articleAuthor[article] = author;
    userArticles[author]!++;
    // Rising with the id, jittered within half a slot and cut to the second: ties stay possible.
    articleCreated[article] = Math.floor((HISTORY_START + (article + random.next() / 2) * spacing) / 1000) * 1000;
    const count = random.between(1, MAX_TAGS_PER_ARTICLE);
    drawDistinct(tagBuffer, tagCount, count, () => tagPopularity.draw(random));
    for (let i = tagCount; i < tagCount + count; i++) tagArticles[tagBuffer[i]!]!++;
    tagCount += count;
    articleTagStart[article + 1] = tagCount;
  }

  const follows = new Int32Array(scale.users * scale.followsPerUser);
  for (let user = 0; user < scale.users; user++) {
    drawDistinct(follows, user * scale.followsPerUser, scale.followsPerUser, popularUser, user);
  }

  const favorites = new Int32Array(scale.users * scale.favoritesPerUser);
  const articleFavorites = new Int32Array(scale.articles);
  for (let user = 0; user < scale.users; user++) {
    drawDistinct(favorites, user * scale.favoritesPerUser, scale.favoritesPerUser, popularArticle);
  }
  for (const article of favorites) articleFavorites[article]!++;

  const drawnArticle = new Int32Array(scale.comments);
  const drawnCreated = new Float64Array(scale.comments);
  const commentsOn = new Uint8Array(scale.articles);
  for (let comment = 0; comment < scale.comments; comment++) {
    let article: number;
    do article = popularArticle();
    while (commentsOn[article] === MAX_COMMENTS_PER_ARTICLE);
    commentsOn[article]!++;
    drawnArticle[comment] = article;
    drawnCreated[comment] = articleCreated[article]! + random.below(HISTORY_END - articleCreated[article]!);
  }
  const order = random.permutation(scale.comments).sort((a, b) => drawnCreated[a]! - drawnCreated[b]! || a - b);
  const commentArticle = order.map((i) => drawnArticle[i]!);
  const commentCreated = Float64Array.from(order, (i) => drawnCreated[i]!);
  const commentAuthor = Int32Array.from(order, () => random.below(scale.users));
  const [blocks, mutes] = drawScreenings(scale);

  return {
    scale,
    articleAuthor,
    articleCreated,
    articleTagStart,
    articleTags: tagBuffer.slice(0, tagCount),
    follows,
    favorites,
    commentArticle,
    commentAuthor,
    commentCreated,
    blocks,
    mutes,
    userArticles,
    articleFavorites,
    tagArticles,
  };
}

/**
 * The blocks and the mutes (scale.screenings, half each) among the viewers, from a stream of their own so that the
 * other tables' rows stay as they were.
 */
function drawScreenings(scale: Scale): [Int32Array, Int32Array] {
  const random = new Random(SEED, Stream.Screenings);
  const viewers = pickEvenly(
    Array.from({ length: scale.users }, (_, user) => user),
    VIEWERS,
  );
  const half = Math.floor(scale.screenings / 2);
  return [half, scale.screenings - half].map((count) => {
    const pairs = new Int32Array(count * 2);
    const taken = new Set<number>();
    for (let i = 0; i < count; i++) {
      let subject: number;
      let object: number;
      do {
        subject = random.pick(viewers);
        object = random.pick(viewers);
      } while (subject === object || taken.has(subject * scale.users + object));
      taken.add(subject * scale.users + object);
      pairs[2 * i] = subject;
      pairs[2 * i + 1] = object;
    }
    return pairs;
  }) as [Int32Array, Int32Array];
}

type ColumnType = 'int' | 'bigint' | 'text';

export interface TableLoad {
  table: string;
  columns: ReadonlyArray<readonly [name: string, type: ColumnType]>;
  rows: number;
  /** Column-major batches (one array per column), the shape PostgreSQL's unnest() takes. */
  batches(): Generator<unknown[][]>;
}

/** `row(i)` is called for i = 0, 1, 2... in order, once each per call of batches(), so it may draw from a stream. */
function tableLoad(
  table: string,
  columns: TableLoad['columns'],
  rows: number,
  start: () => (i: number) => readonly unknown[],
  /** Sized so that one PostgreSQL statement carries a few megabytes. */
  rowsPerBatch = 10_000,
): TableLoad {
  return {
    table,
    columns,
    rows,
    *batches() {
      const row = start();
      for (let from = 0; from < rows; from += rowsPerBatch) {
        const batch: unknown[][] = columns.map(() => []);
        for (let i = from; i < Math.min(from + rowsPerBatch, rows); i++) {
          for (const [column, value] of row(i).entries()) batch[column]!.push(value);
        }
        yield batch;
      }
    },
  };
}

const withoutMarks = (text: string) => text.normalize('NFD').replace(/\p{M}/gu, '');

/** Hottest ranks get the plain words; later ranks reuse them with a number, keeping every name unique. */
function tagName(rank: number): string {
  const word = words.TAG_WORDS[rank % words.TAG_WORDS.length]!;
  const round = Math.floor(rank / words.TAG_WORDS.length);
  return round === 0 ? word : `${word}-${round + 1}`;
}

function articleBody(random: Random): string {
  const target = random.between(300, 2_000);
  const paragraphs: string[] = [];
  let sentences: string[] = [];
  let length = 0;
  while (length < target) {
    const sentence = random.pick(words.SENTENCES);
    sentences.push(sentence);
    length += sentence.length + 1;
    if (sentences.length >= 3 && random.chance(0.3)) {
      paragraphs.push(sentences.join(' '));
      sentences = [];
    }
  }
  if (sentences.length > 0) paragraphs.push(sentences.join(' '));
  return paragraphs.join('\n\n');
}

/** The rows of every table, in an order that satisfies the foreign keys. */
export function tableLoads(plan: Plan, passwordHash: string): TableLoad[] {
  const { scale } = plan;
  const userCreated = (user: number) => SIGNUP_START + Math.floor((user * (HISTORY_START - SIGNUP_START)) / scale.users);

  const users = tableLoad(
    'users',
    [
      ['id', 'int'],
      ['username', 'text'],
      ['username_key', 'text'],
      ['username_skeleton', 'text'],
      ['email', 'text'],
      ['email_key', 'text'],
      ['password_hash', 'text'],
      ['bio', 'text'],
      ['image', 'text'],
      ['token_version', 'int'],
      ['kept_session', 'text'],
      ['articles_count', 'int'],
      ['favorites_count', 'int'],
      ['created_at', 'bigint'],
      ['updated_at', 'bigint'],
    ],
    scale.users,
    () => {
      const random = new Random(SEED, Stream.Users);
      const skeletons = new Set<string>();
      return (user) => {
        const id = user + 1;
        let first = '';
        let last = '';
        const username = lookingUnlikeAny(skeletons, () => {
          first = random.pick(words.FIRST_NAMES);
          last = random.pick(words.LAST_NAMES);
          return `${first}${random.pick(['', '.', '_', '-'])}${last}${id}`;
        });
        const email = `${withoutMarks(first)}.${withoutMarks(last)}${id}@example.com`;
        const created = userCreated(user);
        return [
          id,
          username,
          usernameKey(username),
          usernameSkeleton(username),
          email,
          identityKey(email),
          passwordHash,
          random.chance(0.6) ? random.pick(words.BIOS) : null,
          random.chance(0.4) ? `https://images.example.com/avatars/${id}.jpg` : null,
          0,
          null,
          plan.userArticles[user]!,
          scale.favoritesPerUser,
          created,
          created,
        ];
      };
    },
  );

  const articles = tableLoad(
    'articles',
    [
      ['id', 'int'],
      ['slug', 'text'],
      ['title', 'text'],
      ['description', 'text'],
      ['body', 'text'],
      ['author_id', 'int'],
      ['favorites_count', 'int'],
      ['tag_list', 'text'],
      ['published_at', 'bigint'],
      ['listed_at', 'bigint'],
      ['created_at', 'bigint'],
      ['updated_at', 'bigint'],
    ],
    scale.articles,
    () => {
      const random = new Random(SEED, Stream.Articles);
      return (article) => {
        const id = article + 1;
        const topic = words.TAG_WORDS[plan.articleTags[plan.articleTagStart[article]!]! % words.TAG_WORDS.length]!;
        const title = `${random.pick(words.TITLE_OPENERS)} ${topic} ${random.pick(words.TITLE_SUBJECTS)}${random.pick(words.TITLE_CLOSERS)}`;
        const created = plan.articleCreated[article]!;
        const updated = random.chance(0.1) ? Math.min(HISTORY_END, created + random.below(30 * DAY_MS)) : created;
        return [
          id,
          `${slugify(title)}-${id}`,
          title,
          random.pick(words.DESCRIPTIONS),
          articleBody(random),
          plan.articleAuthor[article]! + 1,
          plan.articleFavorites[article]!,
          JSON.stringify(
            Array.from(plan.articleTags.subarray(plan.articleTagStart[article]!, plan.articleTagStart[article + 1]!), tagName),
          ),
          // Every seeded article is published at its creation, as the API does without a status: listed from then on.
          created,
          created,
          created,
          updated,
        ];
      };
    },
    // Bodies average over a kilobyte.
    2_000,
  );

  const tags = tableLoad(
    'tags',
    [
      ['id', 'int'],
      ['name', 'text'],
      ['article_count', 'int'],
    ],
    scale.tags,
    () => (tag) => [tag + 1, tagName(tag), plan.tagArticles[tag]!],
  );

  const articleOfLink = new Int32Array(plan.articleTags.length);
  for (let article = 0; article < scale.articles; article++) {
    articleOfLink.fill(article, plan.articleTagStart[article]!, plan.articleTagStart[article + 1]!);
  }
  const articleTags = tableLoad(
    'article_tags',
    [
      ['article_id', 'int'],
      ['tag_id', 'int'],
      ['article_listed_at', 'bigint'],
    ],
    plan.articleTags.length,
    () => (link) => {
      const article = articleOfLink[link]!;
      return [article + 1, plan.articleTags[link]! + 1, plan.articleCreated[article]!];
    },
  );

  const follows = tableLoad(
    'follows',
    [
      ['follower_id', 'int'],
      ['followed_id', 'int'],
      ['created_at', 'bigint'],
    ],
    plan.follows.length,
    () => {
      const random = new Random(SEED, Stream.Follows);
      return (link) => [Math.floor(link / scale.followsPerUser) + 1, plan.follows[link]! + 1, random.between(HISTORY_START, HISTORY_END)];
    },
  );

  const favorites = tableLoad(
    'favorites',
    [
      ['user_id', 'int'],
      ['article_id', 'int'],
      ['article_listed_at', 'bigint'],
      ['created_at', 'bigint'],
    ],
    plan.favorites.length,
    () => {
      const random = new Random(SEED, Stream.Favorites);
      return (link) => {
        const article = plan.favorites[link]!;
        const created = plan.articleCreated[article]!;
        return [Math.floor(link / scale.favoritesPerUser) + 1, article + 1, created, random.between(created, HISTORY_END)];
      };
    },
  );

  const comments = tableLoad(
    'comments',
    [
      ['id', 'int'],
      ['article_id', 'int'],
      ['author_id', 'int'],
      ['body', 'text'],
      ['created_at', 'bigint'],
      ['updated_at', 'bigint'],
    ],
    scale.comments,
    () => {
      const random = new Random(SEED, Stream.Comments);
      return (comment) => {
        const body = Array.from({ length: random.between(1, 3) }, () => random.pick(words.COMMENTS)).join(' ');
        const created = plan.commentCreated[comment]!;
        return [comment + 1, plan.commentArticle[comment]! + 1, plan.commentAuthor[comment]! + 1, body, created, created];
      };
    },
  );

  const screenings = (
    [
      ['blocks', 'blocker_id', 'blocked_id', plan.blocks],
      ['mutes', 'muter_id', 'muted_id', plan.mutes],
    ] as const
  ).map(([table, subject, object, pairs]) =>
    tableLoad(
      table,
      [
        [subject, 'int'],
        [object, 'int'],
        ['created_at', 'bigint'],
      ],
      pairs.length / 2,
      // Their triggers count them into users.screened_count as the server's writes do.
      () => (row) => [pairs[2 * row]! + 1, pairs[2 * row + 1]! + 1, HISTORY_END],
    ),
  );
  return [users, articles, tags, articleTags, follows, favorites, comments, ...screenings];
}
