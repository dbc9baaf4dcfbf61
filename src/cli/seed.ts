import { randomInt } from 'node:crypto';
import { sql } from 'kysely';
import { dialectOf, type Executor } from '../db/index.js';
import { countTriggers } from '../db/migrations/0005_counts_by_triggers.js';
import { ANALYZE_STATEMENTS } from '../db/statistics.js';
import { identityKey, lookingUnlikeAny, usernameKey, usernameSkeleton } from '../identity.js';
import { slugify } from '../modules/articles/slug.js';
import { normalizeTags } from '../modules/articles/tags.js';
import { hashPassword } from '../modules/users/passwords.js';

export interface SeedCounts {
  users: number;
  articles: number;
  comments: number;
  follows: number;
  favorites: number;
}

export const SEED_SIZES = {
  small: { users: 10, articles: 30, comments: 60, follows: 30, favorites: 80 },
  medium: { users: 200, articles: 1_000, comments: 3_000, follows: 2_000, favorites: 5_000 },
  large: { users: 2_000, articles: 20_000, comments: 60_000, follows: 30_000, favorites: 100_000 },
} satisfies Record<string, SeedCounts>;

/** Every seeded account signs in with this password, so a demo can log in as anyone it sees. */
export const SEED_PASSWORD = 'conduit-demo';

const TAGS = [
  'javascript',
  'typescript',
  'node',
  'webdev',
  'react',
  'css',
  'postgres',
  'sqlite',
  'devops',
  'testing',
  'security',
  'performance',
  'career',
  'design',
  'rust',
  'go',
  'python',
  'architecture',
  'docker',
  'linux',
  'accessibility',
  'api',
  'beginners',
  'opensource',
  'productivity',
  'databases',
  'cloud',
  'tutorial',
];
const FIRST_NAMES = [
  'Ada',
  'Alan',
  'Amara',
  'Bruno',
  'Chen',
  'Dara',
  'Elif',
  'Femi',
  'Grace',
  'Hiro',
  'Ines',
  'Jonas',
  'Kofi',
  'Lena',
  'Mateo',
  'Nadia',
  'Omar',
  'Priya',
  'Quinn',
  'Rosa',
  'Sven',
  'Tariq',
  'Uma',
  'Vera',
  'Wei',
  'Yara',
  'Zoe',
];
const LAST_NAMES = [
  'Almeida',
  'Brooks',
  'Costa',
  'Dubois',
  'Eriksen',
  'Fischer',
  'Garcia',
  'Haddad',
  'Ivanova',
  'Jensen',
  'Kim',
  'Lopez',
  'Moreau',
  'Nakamura',
  'Okafor',
  'Petrov',
  'Rossi',
  'Silva',
  'Tanaka',
  'Usman',
  'Varga',
  'Weber',
];
const TITLE_OPENERS = [
  'How we',
  'Why I',
  'Lessons learned when we',
  'A gentle guide to how you can',
  'What happened when we',
  'Ten ways to',
  'Stop trying to',
  'The case for how teams',
];
const TITLE_VERBS = ['scaled', 'rewrote', 'tested', 'debugged', 'migrated', 'secured', 'profiled', 'shipped'];
const TITLE_OBJECTS = [
  'a monolith',
  'our API',
  'the build pipeline',
  'a flaky test suite',
  'legacy SQL',
  'the login flow',
  'a slow dashboard',
  'the mobile app',
  'our design system',
  'a job queue',
];
const SENTENCES = [
  'It started as a small experiment on a quiet Friday afternoon.',
  'The first version worked, but nobody could explain why.',
  'We measured everything before touching a single line.',
  'Most of the time went into reading code, not writing it.',
  'The numbers surprised us more than once.',
  'A good test suite turned a scary change into a boring one.',
  'We rolled it out to one percent of traffic first.',
  'In hindsight the simplest option was the right one.',
  'Documentation saved us from repeating the same mistake.',
  'The hardest part was agreeing on what done means.',
  'Small, reversible steps beat one big rewrite.',
  'Here is what we would do differently next time.',
];
const COMMENTS = [
  'Great write-up, thanks for sharing!',
  'We hit the exact same problem last year.',
  'Could you share the benchmark code?',
  'This matches my experience.',
  'I disagree with the second point, but the rest is spot on.',
  'Bookmarked for the next sprint.',
  'How did you handle rollbacks?',
  'Clear and practical, more like this please.',
];

const DAY_MS = 86_400_000;
const HISTORY_DAYS = 365;
const ROWS_PER_INSERT = 500;
const MAX_TAGS_PER_ARTICLE = 5;

/** mulberry32: a tiny, fast generator; the same seed gives the same data on every machine. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generators(random: () => number) {
  const below = (n: number) => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[below(items.length)]!;
  /**
   * Indices 0..n-1 with probability proportional to 1/(rank+1): a few very popular items and a long tail,
   * like real tags, authors and articles. Ranks are shuffled so popularity does not follow insertion order.
   */
  const skewed = (n: number) => {
    const ranks = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = below(i + 1);
      [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
    }
    const cumulative: number[] = [];
    let total = 0;
    for (let rank = 0; rank < n; rank++) {
      total += 1 / (rank + 1);
      cumulative.push(total);
    }
    return () => {
      const target = random() * total;
      let low = 0;
      let high = n - 1;
      while (low < high) {
        const middle = (low + high) >> 1;
        if (cumulative[middle]! < target) low = middle + 1;
        else high = middle;
      }
      return ranks[low]!;
    };
  };
  const between = (from: number, to: number) => from + Math.floor(random() * (to - from));
  return { below, pick, skewed, between };
}

/**
 * `count` distinct pairs: the first member uniform, the second skewed. A taken pair is retried with a uniform
 * second member, and a first member with no second left is drawn again, so filling up to capacity ends.
 * `twoMembers` leaves out pairs of a member with itself (nobody follows themselves).
 */
function distinctPairs(
  count: number,
  firsts: number,
  seconds: number,
  skewedSecond: () => number,
  below: (n: number) => number,
  twoMembers = false,
): [number, number][] {
  const capacity = twoMembers ? seconds - 1 : seconds;
  const used = new Array<number>(firsts).fill(0);
  const taken = new Set<number>();
  const pairs: [number, number][] = [];
  while (pairs.length < count) {
    let first = below(firsts);
    while (used[first]! >= capacity) first = below(firsts);
    const free = (second: number) => !(twoMembers && second === first) && !taken.has(first * seconds + second);
    let second = skewedSecond();
    while (!free(second)) second = below(seconds);
    taken.add(first * seconds + second);
    used[first]!++;
    pairs.push([first, second]);
  }
  return pairs;
}

export interface SeedOptions extends SeedCounts {
  /** Same value, same names, titles and links; unset picks one at random. */
  seedValue?: number;
  now?: number;
}

export interface SeedResult extends SeedCounts {
  seedValue: number;
  tags: number;
  articleTags: number;
  sampleEmail: string | undefined;
}

/** Checks the sizes before any work: pairs must be able to be distinct, and links need something to point at. */
export function checkSeedCounts(counts: SeedCounts): void {
  if (counts.follows > counts.users * (counts.users - 1)) {
    throw new Error(`${counts.users} users can make at most ${counts.users * (counts.users - 1)} follows`);
  }
  if (counts.favorites > counts.users * counts.articles) {
    throw new Error(`${counts.users} users and ${counts.articles} articles allow at most ${counts.users * counts.articles} favorites`);
  }
  if (counts.users === 0 && counts.articles + counts.comments > 0) throw new Error('articles and comments need at least one user');
  if (counts.articles === 0 && counts.comments > 0) throw new Error('comments need at least one article');
}

/** Writes rows in multi-row statements, far fewer round trips than one a row; `done` hears each batch's size. */
async function inBatches<R>(rows: R[], write: (batch: R[]) => Promise<unknown>, done: (rows: number) => void): Promise<void> {
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
    const batch = rows.slice(start, start + ROWS_PER_INSERT);
    await write(batch);
    done(batch.length);
  }
}

/** Sets every count from the rows themselves, as the triggers would have moved them. Linear in the data. */
async function recountAll(trx: Executor): Promise<void> {
  const countOf = (table: 'articles' | 'favorites' | 'article_tags', column: string, key: string) =>
    sql<number>`(select count(*) from ${sql.table(table)} where ${sql.ref(`${table}.${column}`)} = ${sql.ref(key)})`;
  await trx
    .updateTable('users')
    .set({ articles_count: countOf('articles', 'author_id', 'users.id'), favorites_count: countOf('favorites', 'user_id', 'users.id') })
    .execute();
  await trx
    .updateTable('articles')
    .set({ favorites_count: countOf('favorites', 'article_id', 'articles.id') })
    .execute();
  await trx
    .updateTable('tags')
    .set({ article_count: countOf('article_tags', 'tag_id', 'tags.id') })
    .execute();
  await trx
    .updateTable('article_totals')
    .set({ articles: sql<number>`case when stripe = 0 then (select count(*) from articles) else 0 end` })
    .execute();
}

/**
 * Fills the database with demo users, articles (1-5 tags each), follows, favorites and comments, in one
 * transaction: a failed seed leaves nothing behind. Every counter is recounted from the rows at the end, so
 * they agree exactly, also when seeding on top of existing data.
 */
export async function seedDatabase(db: Executor, options: SeedOptions, progress: (rows: number) => void = () => {}): Promise<SeedResult> {
  checkSeedCounts(options);
  const seedValue = options.seedValue ?? randomInt(2 ** 31);
  const { below, pick, skewed, between } = generators(seededRandom(seedValue));
  const now = options.now ?? Date.now();
  const start = now - HISTORY_DAYS * DAY_MS;
  // Argon2 is deliberately slow: one hash serves every seeded account.
  const passwordHash = await hashPassword(SEED_PASSWORD);

  const triggers = countTriggers(dialectOf(db));
  const result = await db.transaction().execute(async (trx) => {
    // Row by row, the count triggers would move a few hot rows once per seeded row (on PostgreSQL each move
    // walks every earlier version of the row in this transaction); recounting once at the end is linear.
    // The tables are locked at once, before any trigger goes: dropping them one by one could lock them in another
    // order than a running server's write and deadlock with it.
    if (dialectOf(db) === 'postgres') {
      await sql`lock table articles, favorites, article_tags in access exclusive mode`.execute(trx);
    }
    for (const statement of triggers.drop) await sql.raw(statement).execute(trx);
    // Numbering after the rows already there keeps names and slugs unique when seeding twice.
    const existing = await trx
      .selectNoFrom((eb) => [
        eb
          .selectFrom('users')
          .select((e) => e.fn.max('id').as('max'))
          .as('users'),
        eb
          .selectFrom('articles')
          .select((e) => e.fn.max('id').as('max'))
          .as('articles'),
      ])
      .executeTakeFirstOrThrow();
    const userBase = Number(existing.users ?? 0);
    const articleBase = Number(existing.articles ?? 0);

    const skeletons = new Set<string>();
    const users = Array.from({ length: options.users }, (_, i) => {
      const username = lookingUnlikeAny(skeletons, () => `${pick(FIRST_NAMES)}${pick(LAST_NAMES)}${userBase + i + 1}`);
      const createdAt = between(start - 30 * DAY_MS, start);
      return {
        username,
        username_key: usernameKey(username),
        username_skeleton: usernameSkeleton(username),
        email: `${usernameKey(username)}@example.com`,
        email_key: identityKey(`${username}@example.com`),
        password_hash: passwordHash,
        bio: below(3) === 0 ? null : `${pick(SENTENCES)} ${pick(SENTENCES)}`,
        image: null,
        created_at: createdAt,
        updated_at: createdAt,
        profile_updated_at: createdAt,
      };
    });
    const userRows: { id: number; username_key: string }[] = [];
    await inBatches(
      users,
      async (batch) => userRows.push(...(await trx.insertInto('users').values(batch).returning(['id', 'username_key']).execute())),
      progress,
    );
    // Mapped by key, not by position: neither database promises RETURNING rows in insertion order.
    const userIdByKey = new Map(userRows.map((row) => [row.username_key, row.id]));
    const userIds = users.map((user) => userIdByKey.get(user.username_key)!);

    const author = skewed(options.users);
    const tag = skewed(TAGS.length);
    const articles = Array.from({ length: options.articles }, (_, i) => {
      const title = `${pick(TITLE_OPENERS)} ${pick(TITLE_VERBS)} ${pick(TITLE_OBJECTS)}`;
      const createdAt = between(start, now);
      const tagCount = 1 + below(MAX_TAGS_PER_ARTICLE);
      const tags = new Set<string>();
      while (tags.size < tagCount) tags.add(TAGS[tag()]!);
      const paragraphs = Array.from({ length: 2 + below(4) }, () => Array.from({ length: 2 + below(4) }, () => pick(SENTENCES)).join(' '));
      const tagList = normalizeTags([...tags]);
      return {
        row: {
          slug: `${slugify(title)}-${articleBase + i + 1}`,
          title,
          description: pick(SENTENCES),
          body: paragraphs.join('\n\n'),
          author_id: userIds[author()]!,
          published_at: createdAt,
          listed_at: createdAt,
          created_at: createdAt,
          updated_at: createdAt + below(3) * DAY_MS,
          tag_list: JSON.stringify(tagList),
        },
        tags: tagList,
      };
    });

    const popular = skewed(options.articles);
    const favorites = distinctPairs(options.favorites, options.users, options.articles, popular, below);

    const articleRows: { id: number; slug: string }[] = [];
    await inBatches(
      articles.map((article) => article.row),
      async (batch) => articleRows.push(...(await trx.insertInto('articles').values(batch).returning(['id', 'slug']).execute())),
      progress,
    );
    const articleIdBySlug = new Map(articleRows.map((row) => [row.slug, row.id]));
    const articleIds = articles.map((article) => articleIdBySlug.get(article.row.slug)!);
    // The revision creating an article keeps (modules/revisions): what was written, when it was written.
    await inBatches(
      articles.map(({ row }, i) => ({
        article_id: articleIds[i]!,
        title: row.title,
        description: row.description,
        body: row.body,
        tag_list: row.tag_list,
        created_at: row.created_at,
      })),
      (batch) => trx.insertInto('article_revisions').values(batch).execute(),
      () => {},
    );

    const usedTags = [...new Set(articles.flatMap((article) => article.tags))];
    if (usedTags.length > 0) {
      await trx
        .insertInto('tags')
        .values(usedTags.map((name) => ({ name })))
        .onConflict((oc) => oc.column('name').doNothing())
        .execute();
    }
    const tagRows =
      usedTags.length === 0 ? [] : await trx.selectFrom('tags').select(['id', 'name']).where('name', 'in', usedTags).execute();
    const tagIdByName = new Map(tagRows.map((row) => [row.name, row.id]));
    const links = articles.flatMap((article, i) =>
      article.tags.map((name) => ({
        article_id: articleIds[i]!,
        tag_id: tagIdByName.get(name)!,
        article_listed_at: article.row.created_at,
      })),
    );
    await inBatches(
      links,
      (batch) => trx.insertInto('article_tags').values(batch).execute(),
      () => {},
    );

    const followed = skewed(options.users);
    const follows = distinctPairs(options.follows, options.users, options.users, followed, below, true);
    await inBatches(
      follows.map(([follower, target]) => ({
        follower_id: userIds[follower]!,
        followed_id: userIds[target]!,
        created_at: between(start, now),
      })),
      (batch) => trx.insertInto('follows').values(batch).execute(),
      progress,
    );

    await inBatches(
      favorites.map(([user, article]) => ({
        user_id: userIds[user]!,
        article_id: articleIds[article]!,
        article_listed_at: articles[article]!.row.created_at,
        created_at: between(articles[article]!.row.created_at, now),
      })),
      (batch) => trx.insertInto('favorites').values(batch).execute(),
      progress,
    );

    const commented = skewed(options.articles);
    const comments = Array.from({ length: options.comments }, () => {
      const article = commented();
      const createdAt = between(articles[article]!.row.created_at, now);
      return {
        article_id: articleIds[article]!,
        author_id: userIds[below(options.users)]!,
        body: pick(COMMENTS),
        created_at: createdAt,
        updated_at: createdAt,
      };
    });
    await inBatches(comments, (batch) => trx.insertInto('comments').values(batch).execute(), progress);

    await recountAll(trx);
    for (const statement of triggers.create) await sql.raw(statement).execute(trx);

    return {
      users: options.users,
      articles: options.articles,
      comments: options.comments,
      follows: options.follows,
      favorites: options.favorites,
      seedValue,
      tags: usedTags.length,
      articleTags: links.length,
      sampleEmail: users[0]?.email,
    };
  });
  // Fresh statistics at once: until autovacuum gets to it, PostgreSQL would plan the feed on an empty table's.
  for (const statement of ANALYZE_STATEMENTS[dialectOf(db)]) await sql.raw(statement).execute(db);
  return result;
}
