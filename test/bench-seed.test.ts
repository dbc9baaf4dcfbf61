import type { FastifyInstance } from 'fastify';
import { type RawBuilder, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Progress } from '../scripts/bench/progress.js';
import { seedDatabase } from '../scripts/bench/seed.js';
import { BENCH_PASSWORD, buildPlan, MAX_COMMENTS_PER_ARTICLE, pickEvenly, SCALES, VIEWERS } from '../scripts/bench/seed-data.js';
import { buildApp } from '../src/app.js';
import { usernameSkeleton } from '../src/identity.js';
import { createScratchDatabase, DATABASES, type ScratchDatabase, testConfig } from './support/app.js';
import { call } from './support/client.js';
import { derivedDataMismatches } from './support/invariants.js';

const scale = SCALES.small;

it('generates the same data on every run', () => {
  expect(buildPlan(scale)).toEqual(buildPlan(scale));
});

// The server trusts the counter columns and the copied creation times instead of counting rows; a seed that got
// one of them wrong would make the bench measure a database the server could never have produced.
for (const kind of DATABASES) {
  describe(`bench seed, small scale [${kind}]`, () => {
    let scratch: ScratchDatabase | undefined;
    let server: FastifyInstance | undefined;
    const app = () => server!;

    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
      const config = testConfig(scratch.url);
      await seedDatabase(config.database, scale, new Progress(kind, { bars: false, log: () => {} }));
      server = await buildApp(config);
    });

    afterAll(async () => {
      await server?.close();
      await scratch?.drop();
    });

    /** The single number a query returns; PostgreSQL's count(*) is a bigint. */
    const value = async (query: RawBuilder<{ n: number | string | null }>) => Number((await query.execute(app().db)).rows[0]?.n);

    it("writes the scale's row counts", async () => {
      const counts = {
        users: await value(sql`select count(*) as n from users`),
        articles: await value(sql`select count(*) as n from articles`),
        tags: await value(sql`select count(*) as n from tags`),
        follows: await value(sql`select count(*) as n from follows`),
        favorites: await value(sql`select count(*) as n from favorites`),
        comments: await value(sql`select count(*) as n from comments`),
        screenings: await value(sql`select (select count(*) from blocks) + (select count(*) from mutes) as n`),
      };
      expect(counts).toEqual({
        users: scale.users,
        articles: scale.articles,
        tags: scale.tags,
        follows: scale.users * scale.followsPerUser,
        favorites: scale.users * scale.favoritesPerUser,
        comments: scale.comments,
        screenings: scale.screenings,
      });
      expect(await value(sql`select count(*) as n from article_tags`)).toBeGreaterThanOrEqual(scale.articles);
      expect(
        await value(sql`select count(*) as n from articles a where not exists (select 1 from article_tags x where x.article_id = a.id)`),
      ).toBe(0);
    });

    it('keeps every counter equal to the rows it counts', async () => {
      expect(
        await value(sql`select count(*) as n from users u
          where u.articles_count <> (select count(*) from articles a where a.author_id = u.id)
             or u.favorites_count <> (select count(*) from favorites f where f.user_id = u.id)`),
      ).toBe(0);
      expect(
        await value(sql`select count(*) as n from articles a
          where a.favorites_count <> (select count(*) from favorites f where f.article_id = a.id)`),
      ).toBe(0);
      expect(
        await value(sql`select count(*) as n from tags t
          where t.article_count <> (select count(*) from article_tags x where x.tag_id = t.id)`),
      ).toBe(0);
      expect(await value(sql`select sum(articles) as n from article_totals`)).toBe(scale.articles);
      // Skewed, not uniform: the most prolific author wrote far more than an even share.
      expect(await value(sql`select max(articles_count) as n from users`)).toBeGreaterThan((10 * scale.articles) / scale.users);
    });

    it("stores each article's tag names on its row, as its tag links name them", async () => {
      expect((await derivedDataMismatches(app().db)).tagLists).toBe(0);
    });

    it('publishes every article at its creation, and copies that into its tag links and favorites', async () => {
      expect(await value(sql`select count(*) as n from articles where published_at <> created_at or status <> 'published'`)).toBe(0);
      expect(
        await value(sql`select count(*) as n from article_tags x join articles a on a.id = x.article_id
          where x.article_listed_at <> a.published_at`),
      ).toBe(0);
      expect(
        await value(sql`select count(*) as n from favorites f join articles a on a.id = f.article_id
          where f.article_listed_at <> a.published_at`),
      ).toBe(0);
    });

    it('blocks and mutes only among the viewers, every viewer screening someone, and counts them as the triggers do', async () => {
      const viewers = pickEvenly(
        Array.from({ length: scale.users }, (_, user) => user + 1),
        VIEWERS,
      );
      const ids = await sql<{ id: number }>`select blocker_id as id from blocks union select blocked_id from blocks
        union select muter_id from mutes union select muted_id from mutes`.execute(app().db);
      expect(ids.rows.map((row) => Number(row.id)).every((id) => viewers.includes(id))).toBe(true);
      expect(await value(sql`select count(*) as n from users where id in (${sql.join(viewers)}) and screened_count = 0`)).toBe(0);
      expect(
        await value(sql`select count(*) as n from users u where u.screened_count <> (select count(*) from blocks b where b.blocker_id = u.id)
          + (select count(*) from blocks b where b.blocked_id = u.id) + (select count(*) from mutes m where m.muter_id = u.id)`),
      ).toBe(0);
    });

    it('never has anyone follow themselves, and caps comments per article', async () => {
      expect(await value(sql`select count(*) as n from follows where follower_id = followed_id`)).toBe(0);
      expect(
        await value(sql`select max(c) as n from (select count(*) as c from comments group by article_id) as per_article`),
      ).toBeLessThanOrEqual(MAX_COMMENTS_PER_ARTICLE);
    });

    if (kind === 'sqlite') {
      it('writes no row whose foreign key points nowhere', async () => {
        expect((await sql`pragma foreign_key_check`.execute(app().db)).rows).toEqual([]);
      });
    }

    it('gives every user the skeleton of its name, so that a lookalike of a seeded name is refused', async () => {
      const users = await app().db.selectFrom('users').select(['username', 'username_skeleton']).execute();
      expect(users.filter((user) => user.username_skeleton !== usernameSkeleton(user.username))).toEqual([]);
      // Latin a, e and o written in Cyrillic: the same letters to the eye.
      const { username } = users.find((user) => /[aeo]/.test(user.username))!;
      const lookalike = username.replace(/[aeo]/g, (letter) => ({ a: '\u0430', e: '\u0435', o: '\u043e' })[letter]!);
      const refused = await call(app(), 'POST', '/api/users', {
        body: { user: { username: lookalike, email: 'lookalike@example.com', password: 'password123' } },
      });
      expect([refused.status, refused.body]).toEqual([409, { errors: { username: ['looks too much like an existing username'] } }]);
    });

    it('serves the data: a seeded user logs in, the list counts every article, new ids follow the seeded ones', async () => {
      const { email } = await app().db.selectFrom('users').select('email').where('id', '=', 7).executeTakeFirstOrThrow();
      const login = await call(app(), 'POST', '/api/users/login', { body: { user: { email, password: BENCH_PASSWORD } } });
      expect(login.status).toBe(200);

      const list = await call(app(), 'GET', '/api/articles');
      expect(list.status).toBe(200);
      expect(list.body.articlesCount).toBe(scale.articles);

      const token = login.body.user.token as string;
      const created = await call(app(), 'POST', '/api/articles', {
        token,
        body: { article: { title: 'After the seed', description: 'd', body: 'b', tagList: ['javascript'] } },
      });
      expect(created.status).toBe(201);
      const row = await app()
        .db.selectFrom('articles')
        .select('id')
        .where('slug', '=', created.body.article.slug)
        .executeTakeFirstOrThrow();
      expect(row.id).toBe(scale.articles + 1);
      // The loader took the count triggers away while it wrote the counts itself; they must be back.
      expect((await call(app(), 'GET', '/api/articles')).body.articlesCount).toBe(scale.articles + 1);
      const favorited = await call(app(), 'POST', `/api/articles/${created.body.article.slug}/favorite`, { token });
      expect(favorited.body.article.favoritesCount).toBe(1);
      const mine = await call(app(), 'GET', `/api/articles?tag=javascript&limit=1`);
      expect(mine.body.articlesCount).toBe(
        await value(sql`select count(*) as n from article_tags x join tags t on t.id = x.tag_id where t.name = 'javascript'`),
      );
    });
  });
}
