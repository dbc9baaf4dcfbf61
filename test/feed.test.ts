import { beforeAll, describe, expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, SUMMARY_KEYS, type TestUser } from './support/client.js';

describeEachDatabase('feed', (ctx) => {
  const app = () => ctx().app;
  const feed = (token?: string, query = '') => call(app(), 'GET', `/api/articles/feed${query}`, { token });
  const follow = async (follower: TestUser, followed: TestUser) => {
    const response = await call(app(), 'POST', `/api/profiles/${followed.username}/follow`, { token: follower.token });
    expect(response.status).toBe(200);
  };
  const slugsOf = (items: Array<{ slug: string }>) => items.map((item) => item.slug);

  it('answers 401 without a token', async () => {
    const response = await feed();
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ errors: { token: ['is missing'] } });
  });

  it('answers 401 for an invalid token', async () => {
    const response = await feed('not.a.token');
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
  });

  it('is empty when following nobody, even with articles around (own ones included)', async () => {
    const loner = await registerUser(app(), 'loner');
    const someone = await registerUser(app(), 'someone');
    await createArticle(app(), someone.token);
    await createArticle(app(), loner.token);
    const response = await feed(loner.token);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
  });

  it('is empty when the followed users have written nothing', async () => {
    const reader = await registerUser(app(), 'reader');
    const silent = await registerUser(app(), 'silent');
    await follow(reader, silent);
    expect((await feed(reader.token)).body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
  });

  describe('with followed authors', () => {
    let reader: TestUser;
    let followedA: TestUser;
    let followedB: TestUser;
    let stranger: TestUser;
    /** Slugs of followed authors' articles, newest first. */
    let wanted: string[];
    /** Author of each of those slugs. */
    const writtenBy = new Map<string, string>();

    beforeAll(async () => {
      const users = await Promise.all(['reader', 'followa', 'followb', 'stranger'].map((prefix) => registerUser(app(), prefix)));
      [reader, followedA, followedB, stranger] = users as [TestUser, TestUser, TestUser, TestUser];
      await follow(reader, followedA);
      await follow(reader, followedB);
      // A stranger follows the reader; that must not put the reader's articles in anyone's feed but the stranger's.
      await follow(stranger, reader);
      const created: string[] = [];
      const writers = [followedA, stranger, followedB, reader, followedA, followedB];
      for (let round = 0; round < 4; round++) {
        for (const writer of writers) {
          const article = await createArticle(app(), writer.token, { tagList: [`round${round}`] });
          if (writer === followedA || writer === followedB) created.push(article.slug);
          writtenBy.set(article.slug, writer.username);
        }
      }
      wanted = created.reverse();
    });

    it("lists exactly the followed authors' articles, newest first, with the true count", async () => {
      const response = await feed(reader.token, '?limit=100');
      expect(response.status).toBe(200);
      expect(wanted).toHaveLength(16);
      expect(slugsOf(response.body.articles)).toEqual(wanted);
      expect(response.body.articlesCount).toBe(16);
      const times = response.body.articles.map((item: { createdAt: string }) => Date.parse(item.createdAt));
      for (let i = 1; i < times.length; i++) expect(times[i]).toBeLessThanOrEqual(times[i - 1]);
    });

    it("shows list items: no body, author followed, favorited from the reader's view", async () => {
      const target = wanted[3]!;
      expect((await call(app(), 'POST', `/api/articles/${target}/favorite`, { token: reader.token })).status).toBe(200);
      const response = await feed(reader.token, '?limit=100');
      for (const item of response.body.articles) {
        expect(Object.keys(item).sort()).toEqual(SUMMARY_KEYS);
        expect(item.author.following).toBe(true);
        expect([followedA.username, followedB.username]).toContain(item.author.username);
        expect(item.favorited).toBe(item.slug === target);
        expect(item.favoritesCount).toBe(item.slug === target ? 1 : 0);
      }
      expect((await call(app(), 'DELETE', `/api/articles/${target}/favorite`, { token: reader.token })).status).toBe(200);
    });

    it('uses a default page of 20', async () => {
      const extraFollower = await registerUser(app(), 'many');
      const prolific = await registerUser(app(), 'prolific');
      await follow(extraFollower, prolific);
      const slugs: string[] = [];
      for (let i = 0; i < 23; i++) slugs.push((await createArticle(app(), prolific.token)).slug);
      const response = await feed(extraFollower.token);
      expect(response.body.articlesCount).toBe(23);
      expect(slugsOf(response.body.articles)).toEqual(slugs.reverse().slice(0, 20));
    });

    it('pages with limit and offset, the count staying the total', async () => {
      const pages: string[] = [];
      for (let offset = 0; offset < 16; offset += 5) {
        const response = await feed(reader.token, `?limit=5&offset=${offset}`);
        expect(response.status).toBe(200);
        expect(response.body.articlesCount).toBe(16);
        expect(response.body.articles).toHaveLength(Math.min(5, 16 - offset));
        pages.push(...slugsOf(response.body.articles));
      }
      expect(pages).toEqual(wanted);
      const past = await feed(reader.token, '?offset=16');
      expect(past.body).toEqual({ articles: [], articlesCount: 16, nextCursor: null });
    });

    it.each([
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=x', 'limit'],
      ['offset=-1', 'offset'],
      ['limit=Infinity', 'limit'],
      ['offset=1e400', 'offset'],
    ])('answers 422 for %s', async (query, field) => {
      const response = await feed(reader.token, `?${query}`);
      expect(response.status).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual([field]);
    });

    it("gives the follower of the reader only the reader's articles", async () => {
      const response = await feed(stranger.token, '?limit=100');
      expect(response.body.articlesCount).toBe(4);
      for (const item of response.body.articles) expect(item.author.username).toBe(reader.username);
    });

    it("drops an author's articles after an unfollow and takes them back after a new follow", async () => {
      const response = await call(app(), 'DELETE', `/api/profiles/${followedB.username}/follow`, { token: reader.token });
      expect(response.status).toBe(200);
      const onlyA = await feed(reader.token, '?limit=100');
      expect(onlyA.body.articlesCount).toBe(8);
      for (const item of onlyA.body.articles) expect(item.author.username).toBe(followedA.username);
      expect(slugsOf(onlyA.body.articles)).toEqual(wanted.filter((slug) => writtenBy.get(slug) === followedA.username));

      await follow(reader, followedB);
      const both = await feed(reader.token, '?limit=100');
      expect(slugsOf(both.body.articles)).toEqual(wanted);
    });

    it('shows a new article of a followed author at the top', async () => {
      const fresh = await createArticle(app(), followedA.token);
      const response = await feed(reader.token, '?limit=1');
      expect(slugsOf(response.body.articles)).toEqual([fresh.slug]);
      expect(response.body.articlesCount).toBe(17);
      expect((await call(app(), 'DELETE', `/api/articles/${fresh.slug}`, { token: followedA.token })).status).toBe(204);
      expect((await feed(reader.token)).body.articlesCount).toBe(16);
    });
  });
});
