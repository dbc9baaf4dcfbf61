import { beforeAll, describe, expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, SUMMARY_KEYS, type TestUser, unique } from './support/client.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ARTICLE_COUNT = 36;

/** What the test knows about one seeded article, independently of the API. */
interface Seeded {
  index: number;
  slug: string;
  title: string;
  description: string;
  author: TestUser;
  tags: string[];
  favoritedBy: Set<string>;
}

/** The same token with one signature character changed. */
function tamper(token: string): string {
  const at = token.length - 5;
  return token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1);
}

interface Item {
  slug: string;
  [key: string]: unknown;
}

describeEachDatabase('article lists', (ctx) => {
  const app = () => ctx().app;

  let authors: TestUser[];
  let viewer: TestUser;
  let fan: TestUser;
  /** Newest first, which is the reverse of creation order. */
  let newestFirst: Seeded[];
  let tag: { red: string; green: string; blue: string; gold: string };

  const list = (query: string, token?: string) => call(app(), 'GET', `/api/articles${query}`, { token });
  const slugsOf = (items: Item[]) => items.map((item) => item.slug);
  const expected = (keep: (article: Seeded) => boolean) => newestFirst.filter(keep).map((article) => article.slug);

  beforeAll(async () => {
    const users = await Promise.all(['alice', 'bob', 'carol', 'dave', 'viewer', 'fan'].map((prefix) => registerUser(app(), prefix)));
    authors = users.slice(0, 4);
    [viewer, fan] = users.slice(4) as [TestUser, TestUser];
    const suffix = unique('');
    tag = { red: `red${suffix}`, green: `green${suffix}`, blue: `blue${suffix}`, gold: `gold${suffix}` };

    const created: Seeded[] = [];
    // One by one, so that creation order is the order of createdAt and of id.
    for (let index = 0; index < ARTICLE_COUNT; index++) {
      const tags = [
        ...(index % 2 === 0 ? [tag.red] : []),
        ...(index % 3 === 0 ? [tag.green] : []),
        ...(index % 5 === 0 ? [tag.blue] : []),
        ...(index === 7 ? [tag.gold] : []),
      ];
      const author = authors[index % authors.length]!;
      const title = `Seeded article ${index} ${unique('')}`;
      const article = await createArticle(app(), author.token, {
        title,
        description: `Description ${index}`,
        body: `Body ${index}`,
        tagList: [...tags].reverse(),
      });
      created.push({
        index,
        slug: article.slug,
        title,
        description: `Description ${index}`,
        author,
        tags: [...tags].sort(),
        favoritedBy: new Set(),
      });
    }

    const favorites: Array<[TestUser, (index: number) => boolean]> = [
      [viewer, (i) => i % 4 === 1 || i % 7 === 0],
      [fan, (i) => i % 3 === 1],
      [authors[0]!, (i) => i % 9 === 0],
    ];
    for (const [user, wants] of favorites) {
      const chosen = created.filter((article) => wants(article.index));
      const responses = await Promise.all(
        chosen.map((article) => call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: user.token })),
      );
      expect(responses.map((response) => response.status)).toEqual(chosen.map(() => 200));
      for (const article of chosen) article.favoritedBy.add(user.username);
    }

    // The viewer follows bob and dave.
    for (const followed of [authors[1]!, authors[3]!]) {
      expect((await call(app(), 'POST', `/api/profiles/${followed.username}/follow`, { token: viewer.token })).status).toBe(200);
    }
    newestFirst = [...created].reverse();
  });

  describe('without filters', () => {
    it('gives the newest 20 by default and the true total', async () => {
      const response = await list('');
      expect(response.status).toBe(200);
      expect(Object.keys(response.body).sort()).toEqual(['articles', 'articlesCount', 'nextCursor']);
      expect(response.body.articlesCount).toBe(ARTICLE_COUNT);
      expect(response.body.articles).toHaveLength(20);
      expect(slugsOf(response.body.articles)).toEqual(expected(() => true).slice(0, 20));
    });

    it('lists items without a body, each exactly as seeded, newest first', async () => {
      const response = await list('?limit=100');
      expect(response.status).toBe(200);
      expect(response.body.articlesCount).toBe(ARTICLE_COUNT);
      const items = response.body.articles as Array<Record<string, unknown>>;
      expect(items).toHaveLength(ARTICLE_COUNT);
      items.forEach((item, position) => {
        const seeded = newestFirst[position]!;
        expect(Object.keys(item).sort()).toEqual(SUMMARY_KEYS);
        expect(item).not.toHaveProperty('body');
        expect(item).toEqual({
          slug: seeded.slug,
          title: seeded.title,
          description: seeded.description,
          tagList: seeded.tags,
          createdAt: expect.stringMatching(ISO_MS),
          updatedAt: expect.stringMatching(ISO_MS),
          favorited: false,
          favoritesCount: seeded.favoritedBy.size,
          author: { username: seeded.author.username, bio: null, image: null, following: false },
          status: 'published',
          publishAt: null,
          publishedAt: item.createdAt,
        });
      });
      const times = items.map((item) => Date.parse(item.createdAt as string));
      for (let i = 1; i < times.length; i++) expect(times[i]).toBeLessThanOrEqual(times[i - 1]!);
    });
  });

  describe('filters', () => {
    it.each(['red', 'green', 'blue', 'gold'] as const)('by tag %s', async (name) => {
      const response = await list(`?tag=${tag[name]}&limit=100`);
      expect(response.status).toBe(200);
      const want = expected((article) => article.tags.includes(tag[name]));
      expect(want.length).toBeGreaterThan(0);
      expect(slugsOf(response.body.articles)).toEqual(want);
      expect(response.body.articlesCount).toBe(want.length);
      for (const item of response.body.articles) expect(item.tagList).toContain(tag[name]);
    });

    it('matches the tag exactly, not by prefix', async () => {
      const response = await list(`?tag=${tag.red.slice(0, -1)}`);
      expect(response.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
    });

    it('by author, for every author', async () => {
      for (const author of authors) {
        const response = await list(`?author=${author.username}&limit=100`);
        expect(response.status).toBe(200);
        const want = expected((article) => article.author === author);
        expect(want).toHaveLength(ARTICLE_COUNT / authors.length);
        expect(slugsOf(response.body.articles)).toEqual(want);
        expect(response.body.articlesCount).toBe(want.length);
      }
    });

    it('matches the author regardless of case', async () => {
      const author = authors[2]!;
      const want = expected((article) => article.author === author);
      for (const spelling of [author.username.toUpperCase(), author.username[0]!.toUpperCase() + author.username.slice(1)]) {
        const response = await list(`?author=${encodeURIComponent(spelling)}&limit=100`);
        expect(response.status).toBe(200);
        expect(slugsOf(response.body.articles)).toEqual(want);
        expect(response.body.articlesCount).toBe(want.length);
      }
    });

    it('by favorited, for each user who favorited', async () => {
      for (const user of [viewer, fan, authors[0]!]) {
        const response = await list(`?favorited=${user.username}&limit=100`);
        expect(response.status).toBe(200);
        const want = expected((article) => article.favoritedBy.has(user.username));
        expect(want.length).toBeGreaterThan(0);
        expect(slugsOf(response.body.articles)).toEqual(want);
        expect(response.body.articlesCount).toBe(want.length);
      }
    });

    it('by favorited, for a user who favorited nothing: empty', async () => {
      const response = await list(`?favorited=${authors[2]!.username}`);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
    });

    it('by favorited, regardless of case', async () => {
      const response = await list(`?favorited=${fan.username.toUpperCase()}&limit=100`);
      expect(slugsOf(response.body.articles)).toEqual(expected((article) => article.favoritedBy.has(fan.username)));
    });

    it('combines tag and author with AND', async () => {
      const author = authors[0]!;
      const response = await list(`?tag=${tag.green}&author=${author.username}&limit=100`);
      const want = expected((article) => article.author === author && article.tags.includes(tag.green));
      expect(want.length).toBeGreaterThan(0);
      expect(want.length).toBeLessThan(expected((article) => article.tags.includes(tag.green)).length);
      expect(slugsOf(response.body.articles)).toEqual(want);
      expect(response.body.articlesCount).toBe(want.length);
    });

    it('combines author and favorited with AND', async () => {
      const author = authors[1]!;
      const response = await list(`?author=${author.username}&favorited=${viewer.username}&limit=100`);
      const want = expected((article) => article.author === author && article.favoritedBy.has(viewer.username));
      expect(want.length).toBeGreaterThan(0);
      expect(slugsOf(response.body.articles)).toEqual(want);
      expect(response.body.articlesCount).toBe(want.length);
    });

    it('combines tag and favorited with AND', async () => {
      const response = await list(`?tag=${tag.red}&favorited=${fan.username}&limit=100`);
      const want = expected((article) => article.tags.includes(tag.red) && article.favoritedBy.has(fan.username));
      expect(want.length).toBeGreaterThan(0);
      expect(slugsOf(response.body.articles)).toEqual(want);
      expect(response.body.articlesCount).toBe(want.length);
    });

    it('combines all three filters with AND', async () => {
      const author = authors[0]!;
      const response = await list(`?tag=${tag.red}&author=${author.username}&favorited=${viewer.username}&limit=100`);
      const want = expected(
        (article) => article.author === author && article.tags.includes(tag.red) && article.favoritedBy.has(viewer.username),
      );
      expect(want.length).toBeGreaterThan(0);
      expect(slugsOf(response.body.articles)).toEqual(want);
      expect(response.body.articlesCount).toBe(want.length);
    });

    it('gives an empty list when filters match separately but not together', async () => {
      // gold is on article 7 only, which is by dave (7 % 4 = 3); alice never wrote it.
      const response = await list(`?tag=${tag.gold}&author=${authors[0]!.username}`);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
    });

    it.each([
      ['an unknown author', () => `?author=${unique('nobody')}`],
      ['an unknown tag', () => `?tag=${unique('no-such-tag-')}`],
      ['an unknown favorited user', () => `?favorited=${unique('nobody')}`],
      ['a known tag and an unknown author', () => `?tag=${tag.red}&author=${unique('nobody')}`],
    ])('gives an empty list with articlesCount 0 for %s', async (_name, query) => {
      const response = await list(query());
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
    });
  });

  describe('pagination', () => {
    it('walks every page with limit and offset; the count is always the total', async () => {
      const pages: string[] = [];
      for (let offset = 0; offset < ARTICLE_COUNT; offset += 7) {
        const response = await list(`?limit=7&offset=${offset}`);
        expect(response.status).toBe(200);
        expect(response.body.articlesCount).toBe(ARTICLE_COUNT);
        expect(response.body.articles).toHaveLength(Math.min(7, ARTICLE_COUNT - offset));
        pages.push(...slugsOf(response.body.articles));
      }
      expect(pages).toEqual(expected(() => true));
    });

    it('gives an empty page past the end, still with the true count', async () => {
      for (const offset of [ARTICLE_COUNT, ARTICLE_COUNT + 1, 10_000]) {
        const response = await list(`?offset=${offset}`);
        expect(response.status).toBe(200);
        expect(response.body).toEqual({ articles: [], articlesCount: ARTICLE_COUNT, nextCursor: null });
      }
    });

    it('pages within a filter', async () => {
      const want = expected((article) => article.tags.includes(tag.red));
      const response = await list(`?tag=${tag.red}&limit=3&offset=2`);
      expect(slugsOf(response.body.articles)).toEqual(want.slice(2, 5));
      expect(response.body.articlesCount).toBe(want.length);
    });

    it('accepts limit 1 and limit 100', async () => {
      const one = await list('?limit=1');
      expect(one.status).toBe(200);
      expect(slugsOf(one.body.articles)).toEqual(expected(() => true).slice(0, 1));
      expect(one.body.articlesCount).toBe(ARTICLE_COUNT);
      const hundred = await list('?limit=100');
      expect(hundred.status).toBe(200);
      expect(hundred.body.articles).toHaveLength(ARTICLE_COUNT);
    });

    it('accepts offset 0 explicitly', async () => {
      const response = await list('?offset=0&limit=5');
      expect(slugsOf(response.body.articles)).toEqual(expected(() => true).slice(0, 5));
    });

    it.each([
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=-1', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=1.5', 'limit'],
      ['offset=-1', 'offset'],
      ['offset=abc', 'offset'],
      ['offset=0.5', 'offset'],
      // Coerced to numbers that are not finite, which the range checks alone let through to the database.
      ['limit=Infinity', 'limit'],
      ['limit=-Infinity', 'limit'],
      ['offset=Infinity', 'offset'],
      ['offset=1e400', 'offset'],
      // A NUL character, which PostgreSQL refuses in any query.
      ['tag=%00', 'tag'],
      ['author=a%00b', 'author'],
      ['favorited=%00', 'favorited'],
    ])('answers 422 for %s', async (query, field) => {
      const response = await list(`?${query}`);
      expect(response.status).toBe(422);
      expect(Object.keys(response.body)).toEqual(['errors']);
      expect(Object.keys(response.body.errors)).toEqual([field]);
      expect(response.body.errors[field]).toEqual([expect.any(String)]);
    });

    it('reports a bad limit and a bad offset at once', async () => {
      const response = await list('?limit=0&offset=-1');
      expect(response.status).toBe(422);
      expect(Object.keys(response.body.errors).sort()).toEqual(['limit', 'offset']);
    });
  });

  describe('viewer flags', () => {
    it('shows favorited and following for an authenticated viewer, per item', async () => {
      const followed = new Set([authors[1]!.username, authors[3]!.username]);
      const response = await list('?limit=100', viewer.token);
      expect(response.status).toBe(200);
      const items = response.body.articles as Array<{
        slug: string;
        favorited: boolean;
        favoritesCount: number;
        author: { username: string; following: boolean };
      }>;
      expect(slugsOf(items)).toEqual(expected(() => true));
      items.forEach((item, position) => {
        const seeded = newestFirst[position]!;
        expect(item.favorited).toBe(seeded.favoritedBy.has(viewer.username));
        expect(item.favoritesCount).toBe(seeded.favoritedBy.size);
        expect(item.author.following).toBe(followed.has(seeded.author.username));
      });
      // Both values occur, so the flags are really per item.
      expect(new Set(items.map((item) => item.favorited))).toEqual(new Set([true, false]));
      expect(new Set(items.map((item) => item.author.following))).toEqual(new Set([true, false]));
    });

    it('shows another viewer their own flags', async () => {
      const response = await list('?limit=100', fan.token);
      const items = response.body.articles as Array<{ favorited: boolean; author: { following: boolean } }>;
      items.forEach((item, position) => {
        expect(item.favorited).toBe(newestFirst[position]!.favoritedBy.has(fan.username));
        expect(item.author.following).toBe(false);
      });
    });

    it('shows false everywhere for an anonymous viewer', async () => {
      const response = await list(`?favorited=${viewer.username}&limit=100`);
      expect(response.body.articles.length).toBeGreaterThan(0);
      for (const item of response.body.articles) {
        expect(item.favorited).toBe(false);
        expect(item.author.following).toBe(false);
      }
    });

    it('accepts a Bearer token as well', async () => {
      const response = await call(app(), 'GET', `/api/articles?favorited=${viewer.username}`, {
        headers: { authorization: `Bearer ${viewer.token}` },
      });
      expect(response.status).toBe(200);
      expect(response.body.articles.length).toBeGreaterThan(0);
      for (const item of response.body.articles) expect(item.favorited).toBe(true);
    });

    it.each([
      ['a garbage token', 'Token garbage'],
      ['a token with a broken signature', 'TAMPER'],
      ['an unknown scheme', 'Basic dXNlcjpwYXNz'],
    ])('answers 401 for %s, never silently anonymous', async (_name, header) => {
      const authorization = header === 'TAMPER' ? `Token ${tamper(viewer.token)}` : header;
      const response = await call(app(), 'GET', '/api/articles', { headers: { authorization } });
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
    });
  });
});
