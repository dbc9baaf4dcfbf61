import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { SEED_PASSWORD } from '../src/cli/seed.js';
import type { DatabaseHandle } from '../src/db/index.js';
import { eventMask } from '../src/modules/events/catalogue.js';
import { createScratchDatabase, DATABASES, type ScratchDatabase, testConfig, withDatabase } from './support/app.js';
import { call, createArticle, registerUser } from './support/client.js';
import { derivedDataMismatches, NO_MISMATCHES } from './support/invariants.js';
import { childEnv, runConduit } from './support/processes.js';

describe('conduit --help', () => {
  it.each([
    [[], /Usage: conduit \[options\] \[command\][\s\S]*serve[\s\S]*migrate[\s\S]*seed/],
    [['serve'], /Usage: conduit serve[\s\S]*--workers <n>[\s\S]*default\s+WORKERS\s+or\s+1/],
    [['migrate'], /Usage: conduit migrate[\s\S]*up[\s\S]*down[\s\S]*status/],
    [['migrate', 'up'], /Usage: conduit migrate up/],
    [['migrate', 'down'], /Usage: conduit migrate down[\s\S]*drops every table/],
    [['migrate', 'status'], /Usage: conduit migrate status/],
    [['seed'], new RegExp(`Usage: conduit seed[\\s\\S]*--size[\\s\\S]*--seed-value[\\s\\S]*"${SEED_PASSWORD}"`)],
  ])('conduit %j --help', async (command, expected) => {
    const result = await runConduit([...command, '--help'], childEnv('sqlite:/nonexistent/never-opened.db'));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(expected);
  });

  it('rejects a bad number with a one-line reason', async () => {
    const result = await runConduit(['seed', '--users', 'many'], childEnv('sqlite:/nonexistent/never-opened.db'));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/option '--users <n>' argument 'many' is invalid/);
  });
});

/** Rows per table, and how many counters and copies disagree with the rows they stand for. */
async function census({ db }: DatabaseHandle) {
  const count = async (
    table: 'users' | 'articles' | 'article_revisions' | 'tags' | 'article_tags' | 'follows' | 'favorites' | 'comments',
  ) =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const tagsPerArticle = await db
    .selectFrom('articles')
    .leftJoin('article_tags', 'article_tags.article_id', 'articles.id')
    .select((eb) => eb.fn.count('article_tags.tag_id').as('tags'))
    .groupBy('articles.id')
    .execute();
  const mostFavorited = await db
    .selectFrom('articles')
    .select((eb) => eb.fn.max('favorites_count').as('n'))
    .executeTakeFirstOrThrow();
  return {
    users: await count('users'),
    articles: await count('articles'),
    revisions: await count('article_revisions'),
    follows: await count('follows'),
    favorites: await count('favorites'),
    comments: await count('comments'),
    mismatches: await derivedDataMismatches(db),
    tagsPerArticle: tagsPerArticle.map((row) => Number(row.tags)),
    mostFavorited: Number(mostFavorited.n ?? 0),
  };
}

/** Every migration, oldest first, as `conduit migrate` names them. */
const MIGRATIONS = [
  '0001_initial',
  '0002_idempotency_keys',
  '0003_list_counters',
  '0004_account_version',
  '0005_counts_by_triggers',
  '0006_tag_list_order',
  '0007_username_skeletons',
  '0008_route_word_slugs',
  '0009_events',
  '0010_webhook_queue',
  '0011_article_search',
  '0012_tag_list_with_article',
  '0013_article_lifecycle',
  '0014_article_revisions',
  '0015_account_deletion',
  '0016_account_export',
  '0017_scheduled_link_keys',
  '0018_moderation',
  '0019_confusables_unicode_17',
  '0020_webhook_fair_share',
  '0021_profile_time',
  '0022_screened_ids',
  '0023_without_sqlite_samples',
];

const SMALL = ['--users', '6', '--articles', '15', '--comments', '25', '--follows', '10', '--favorites', '40'];

for (const kind of DATABASES) {
  describe(`conduit migrate and seed [${kind}]`, () => {
    let scratch: ScratchDatabase;
    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
    });
    afterAll(async () => {
      await scratch?.drop();
    });

    // A run of the real command per step, each a new Node process: on a busy 2-core machine, over the default 30 s.
    it('migrate status, up and down move the schema one step at a time', { timeout: 120_000 }, async () => {
      const env = childEnv(scratch.url);
      const lines = (entries: string[]) => new RegExp(`^${entries.join('\\n')}\\n$`);
      const pending = (names: string[]) => names.map((name) => `pending {2}${name}`);
      const applied = (names: string[]) => names.map((name) => `applied {2}${name} {2}\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z`);
      const last = MIGRATIONS.at(-1)!;
      const allButLast = MIGRATIONS.slice(0, -1);
      const steps: [string[], RegExp][] = [
        [['status'], lines(pending(MIGRATIONS))],
        [['up'], lines(MIGRATIONS.map((name) => `applied ${name}`))],
        [['status'], lines(applied(MIGRATIONS))],
        [['up'], /^nothing to apply: the database is up to date\n$/],
        [['down'], lines([`reverted ${last}`])],
        [['status'], lines([...applied(allButLast), ...pending([last])])],
        ...[...allButLast].reverse().map((name): [string[], RegExp] => [['down'], lines([`reverted ${name}`])]),
        [['status'], lines(pending(MIGRATIONS))],
        [['down'], /^nothing to revert: no migration is applied\n$/],
      ];
      for (const [args, expected] of steps) {
        const result = await runConduit(['migrate', ...args], env);
        expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' });
        expect(result.stdout).toMatch(expected);
      }
      // Reverted for real: the tables are gone, not just the bookkeeping row.
      const tables = await withDatabase(scratch.url, ({ db }) => db.introspection.getTables());
      expect(tables.map((table) => table.name).filter((name) => !name.startsWith('kysely_'))).toEqual([]);
    });

    it('seed migrates, writes the asked-for rows with consistent counters, and its users can sign in', async () => {
      const env = childEnv(scratch.url);
      const first = await runConduit(['seed', ...SMALL, '--seed-value', '42'], env);
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/^seeded 6 users, 15 articles \(\d+ tag links on \d+ tags\), 10 follows, 40 favorites, 25 comments$/m);
      expect(first.stdout).toContain('seed value 42');
      // Again on top: numbering continues after the existing rows instead of colliding with them.
      const second = await runConduit(['seed', ...SMALL, '--seed-value', '42'], env);
      expect(second.code).toBe(0);

      await withDatabase(scratch.url, async (database) => {
        const found = await census(database);
        expect(found).toMatchObject({
          users: 12,
          articles: 30,
          // Each article's first revision, as creating one through the API keeps.
          revisions: 30,
          follows: 20,
          favorites: 80,
          comments: 50,
          mismatches: NO_MISMATCHES,
        });
        expect(found.tagsPerArticle.every((tags) => tags >= 1 && tags <= 5)).toBe(true);
        // Skewed popularity: with 40 favorites over 15 articles, the favourite has clearly more than its share.
        expect(found.mostFavorited).toBeGreaterThan(40 / 15);

        const email = /sign in as (\S+) \//.exec(second.stdout)?.[1];
        expect(email).toBeDefined();
        const app = await buildApp(testConfig(scratch.url), { database });
        try {
          const login = await call(app, 'POST', '/api/users/login', { body: { user: { email, password: SEED_PASSWORD } } });
          expect(login.status).toBe(200);
          expect(login.body.user.email).toBe(email);
        } finally {
          await app.close();
        }
      });
    });

    it('events list prints the envelopes consumers receive, filtered by id and type; events replay queues them for webhooks', async () => {
      const firstId = await withDatabase(scratch.url, async (database) => {
        const app = await buildApp(testConfig(scratch.url), { database });
        try {
          const writer = await registerUser(app, 'cli');
          await createArticle(app, writer.token, { title: 'Listed by the CLI' });
          const mine = await database.db.selectFrom('events').select('id').orderBy('id', 'desc').limit(2).execute();
          return mine.at(-1)!.id;
        } finally {
          await app.close();
        }
      });
      const env = childEnv(scratch.url);
      const all = await runConduit(['events', 'list', '--after', String(firstId - 1)], env);
      expect({ code: all.code, stderr: all.stderr }).toEqual({ code: 0, stderr: '' });
      const listed = all.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(listed.map((event) => [event.id, event.type, event.version])).toEqual([
        [String(firstId), 'user.registered', 1],
        [String(firstId + 1), 'article.created', 1],
      ]);
      expect(listed[1].data.article).toMatchObject({ title: 'Listed by the CLI', favorited: false });
      const articlesOnly = await runConduit(['events', 'list', '--after', String(firstId - 1), '--type', 'article.created'], env);
      expect(
        articlesOnly.stdout
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line).type),
      ).toEqual(['article.created']);
      const unknown = await runConduit(['events', 'list', '--type', 'article.exploded'], env);
      expect(unknown.code).not.toBe(0);
      expect(unknown.stderr).toContain('article.exploded');

      // Replay: to every endpoint of the owner that takes the type, or to the one named.
      await withDatabase(scratch.url, async ({ db }) => {
        const articleEvent = Number(listed[1].id);
        const owner = await db.selectFrom('events').select('owner_id').where('id', '=', articleEvent).executeTakeFirstOrThrow();
        const endpoint = (mask: number) =>
          db
            .insertInto('webhook_endpoints')
            .values({ owner_id: owner.owner_id!, url: 'https://example.com/hook', event_mask: mask, secret: 'whsec_x', created_at: 0 })
            .returning('id')
            .executeTakeFirstOrThrow();
        const wantsArticles = await endpoint(eventMask(['article.created']));
        const wantsComments = await endpoint(eventMask(['comment.created']));
        const toAll = await runConduit(['events', 'replay', String(articleEvent)], env);
        expect({ code: toAll.code, stdout: toAll.stdout }).toEqual({ code: 0, stdout: `queued event ${articleEvent} for 1 endpoint\n` });
        const toOne = await runConduit(['events', 'replay', String(articleEvent), '--endpoint', String(wantsComments.id)], env);
        expect(toOne.code).toBe(0);
        const queued = await db
          .selectFrom('webhook_deliveries')
          .select('endpoint_id')
          .where('event_id', '=', articleEvent)
          .orderBy('id')
          .execute();
        expect(queued.map((row) => row.endpoint_id)).toEqual([wantsArticles.id, wantsComments.id]);
        const missing = await runConduit(['events', 'replay', '999999999'], env);
        expect(missing.code).toBe(1);
        expect(missing.stderr).toMatch(/event 999999999 does not exist/);
      });
    });

    it('seed refuses sizes it cannot fill and writes nothing, and fills exactly to capacity', async () => {
      await withDatabase(scratch.url, async (database) => {
        const before = await census(database);
        const args = ['seed', '--users', '2', '--follows', '5', '--articles', '0', '--comments', '0', '--favorites', '0'];
        const result = await runConduit(args, childEnv(scratch.url));
        expect(result.code).toBe(1);
        expect(result.stderr).toMatch(/^conduit: 2 users can make at most 2 follows$/m);
        expect(await census(database)).toEqual(before);

        // Exactly at capacity: every possible follow and favorite, which random picks must still reach.
        const full = ['seed', '--users', '2', '--follows', '2', '--articles', '2', '--favorites', '4', '--comments', '0'];
        expect((await runConduit(full, childEnv(scratch.url))).code).toBe(0);
        expect(await census(database)).toMatchObject({
          users: before.users + 2,
          follows: before.follows + 2,
          favorites: before.favorites + 4,
          mismatches: NO_MISMATCHES,
        });
      });
    });
  });
}

describe('conduit seed --seed-value', () => {
  it('gives the same names, titles and links for the same value', async () => {
    const scratches = [await createScratchDatabase('sqlite'), await createScratchDatabase('sqlite')];
    try {
      const snapshots = [];
      for (const scratch of scratches) {
        const result = await runConduit(['seed', ...SMALL, '--seed-value', '7'], childEnv(scratch.url));
        expect(result.code).toBe(0);
        snapshots.push(
          await withDatabase(scratch.url, async ({ db }) => ({
            users: await db.selectFrom('users').select(['username', 'bio']).orderBy('id').execute(),
            articles: await db.selectFrom('articles').select(['slug', 'author_id', 'favorites_count']).orderBy('id').execute(),
            follows: await db
              .selectFrom('follows')
              .select(['follower_id', 'followed_id'])
              .orderBy('follower_id')
              .orderBy('followed_id')
              .execute(),
          })),
        );
      }
      expect(snapshots[0]!.users).toHaveLength(6);
      expect(snapshots[1]).toEqual(snapshots[0]);
    } finally {
      for (const scratch of scratches) await scratch.drop();
    }
  });
});
