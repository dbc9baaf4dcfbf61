import { beforeAll, expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, setFavorite, setFollowing, type TestUser, unique } from './support/client.js';

interface ListBody {
  articles: { slug: string }[];
  articlesCount: number;
  nextCursor: string | null;
  errors?: Record<string, string[]>;
}

describeEachDatabase('cursor pagination', (ctx) => {
  const app = () => ctx().app;
  const get = (url: string, token?: string) => call<ListBody>(app(), 'GET', url, { token });
  let writer: TestUser;
  let reader: TestUser;
  const tag = unique('paged');

  beforeAll(async () => {
    [writer, reader] = await Promise.all([registerUser(app(), 'writer'), registerUser(app(), 'reader')]);
    await setFollowing(app(), reader.token, writer.username);
    const written: string[] = [];
    for (let i = 0; i < 9; i++) written.push((await createArticle(app(), writer.token, { tagList: [tag] })).slug);
    for (const slug of written) await setFavorite(app(), reader.token, slug);
  });

  /** Every page of `url` by cursor, writing a new article (of the same list) after each page. */
  async function pageThrough(url: string, token?: string) {
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const response = await get(`${url}&limit=4${cursor ? `&cursor=${cursor}` : ''}`, token);
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      pages.push(response.body.articles.map((article) => article.slug));
      cursor = response.body.nextCursor;
      const arriving = await createArticle(app(), writer.token, { tagList: [tag] });
      await setFavorite(app(), reader.token, arriving.slug);
    } while (cursor !== null && pages.length < 10);
    return pages;
  }

  it.each([
    ['by tag', () => `/api/articles?tag=${tag}`],
    ['by author', () => `/api/articles?author=${writer.username}`],
    ['by favorited', () => `/api/articles?favorited=${reader.username}`],
    ['feed', () => '/api/articles/feed?'],
  ])('pages %s in order with no repeat or gap while new articles arrive', async (_, url) => {
    const before = await get(`${url()}&limit=100`, reader.token);
    const expected = before.body.articles.map((article) => article.slug);
    const pages = await pageThrough(url(), reader.token);
    expect(expected.length).toBeGreaterThanOrEqual(9);
    // Articles written while paging are newer than every cursor: they never push an article onto the next page.
    expect(pages.flat()).toEqual(expected);
  });

  it('gives the same pages as offsets when nothing changes, and null after the last', async () => {
    const author = await registerUser(app(), 'quiet');
    for (let i = 0; i < 5; i++) await createArticle(app(), author.token);
    const all = (await get(`/api/articles?author=${author.username}`)).body;
    const first = (await get(`/api/articles?author=${author.username}&limit=2`)).body;
    const second = (await get(`/api/articles?author=${author.username}&limit=2&cursor=${first.nextCursor}`)).body;
    const third = (await get(`/api/articles?author=${author.username}&limit=2&cursor=${second.nextCursor}`)).body;
    expect([...first.articles, ...second.articles, ...third.articles]).toEqual(all.articles);
    expect(third.nextCursor).toBeNull();
    expect(all.nextCursor).toBeNull();
    expect(second.articlesCount).toBe(5);
    // An offset page hands out a cursor too: to the page after it.
    const byOffset = (await get(`/api/articles?author=${author.username}&limit=2&offset=2`)).body;
    expect(byOffset.nextCursor).toBe(second.nextCursor);
  });

  it('refuses a cursor it did not make, and a cursor with an offset', async () => {
    const { nextCursor } = (await get(`/api/articles?tag=${tag}&limit=1`)).body;
    const forged = [
      'x',
      Buffer.from('[1,2,3]').toString('base64url'),
      Buffer.from('["rank",0,1]').toString('base64url'),
      Buffer.from('[1.5,2]').toString('base64url'),
      Buffer.from('{"a":1}').toString('base64url'),
      `${nextCursor}=`,
      `${nextCursor!.slice(0, -1)}*`,
    ];
    for (const cursor of forged) {
      const response = await get(`/api/articles?cursor=${encodeURIComponent(cursor)}`);
      expect(response.status, cursor).toBe(422);
      expect(response.body.errors).toHaveProperty('cursor');
    }
    const both = await get(`/api/articles?offset=1&cursor=${nextCursor}`);
    expect(both.status).toBe(422);
    expect(both.body.errors?.cursor).toEqual(['cannot be combined with offset']);
  });

  it('continues from where the cursor points, even when that article is gone', async () => {
    const first = (await get(`/api/articles?author=${writer.username}&limit=2`, reader.token)).body;
    const [, last] = first.articles;
    await call(app(), 'DELETE', `/api/articles/${last!.slug}`, { token: writer.token });
    const next = (await get(`/api/articles?author=${writer.username}&limit=2&cursor=${first.nextCursor}`, reader.token)).body;
    const all = (await get(`/api/articles?author=${writer.username}&limit=100`, reader.token)).body.articles.map((a) => a.slug);
    expect(next.articles.map((article) => article.slug)).toEqual(all.slice(1, 3));
  });
});
