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

  it("refuses a cursor whose article id is past the id column's range, on every list, the feed and search", async () => {
    const cursor = (fields: unknown[]) => Buffer.from(JSON.stringify(fields)).toString('base64url');
    const byTime = { past: [1, 2 ** 31], last: [1, 2 ** 31 - 1] };
    const pages: Array<[string, string | undefined, { past: unknown[]; last: unknown[] }]> = [
      ['/api/articles?', undefined, byTime],
      [`/api/articles?tag=${tag}&`, undefined, byTime],
      [`/api/articles?author=${writer.username}&`, undefined, byTime],
      [`/api/articles?favorited=${reader.username}&`, undefined, byTime],
      ['/api/articles/feed?', reader.token, byTime],
      ['/api/user/articles?', writer.token, byTime],
      // A search's horizon is an article id; its position is an offset, which may go further.
      [`/api/articles?q=${tag}&`, undefined, { past: ['rank', 1, 2 ** 31], last: ['rank', 2 ** 31, 2 ** 31 - 1] }],
    ];
    expect(cursor(byTime.past)).toBe('WzEsMjE0NzQ4MzY0OF0');
    for (const [url, token, { past, last }] of pages) {
      const refused = await get(`${url}cursor=${cursor(past)}`, token);
      expect(refused.status, `${url} ${JSON.stringify(refused.body)}`).toBe(422);
      expect(refused.body.errors, url).toEqual({ cursor: ['is invalid'] });
      // Up to the largest id there can be, a cursor is one this server could have made: past the end, an empty page.
      const empty = await get(`${url}cursor=${cursor(last)}`, token);
      expect(empty.status, `${url} ${JSON.stringify(empty.body)}`).toBe(200);
      expect(empty.body.articles, url).toEqual([]);
    }
  });

  it('takes an id cursor up to 2^53 - 1 where ids are BIGINT on PostgreSQL: notifications and revisions', async () => {
    const cursor = (id: number) => Buffer.from(String(id)).toString('base64url');
    const { slug } = await createArticle(app(), writer.token);
    for (const [url, token] of [
      ['/api/notifications', reader.token],
      [`/api/articles/${slug}/revisions`, writer.token],
    ] as const) {
      for (const id of [2 ** 31, Number.MAX_SAFE_INTEGER]) {
        const response = await call(app(), 'GET', `${url}?cursor=${cursor(id)}`, { token });
        expect(response.status, `${url} ${id} ${JSON.stringify(response.body)}`).toBe(200);
      }
      const refused = await call(app(), 'GET', `${url}?cursor=${cursor(2 ** 53)}`, { token });
      expect(refused.status, url).toBe(422);
      expect(refused.body.errors, url).toEqual({ cursor: ['is invalid'] });
    }
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
