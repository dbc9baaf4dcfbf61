import { beforeAll, describe, expect, it, vi } from 'vitest';
import { ROUTE_WORDS } from '../src/modules/articles/slug.js';
import { describeEachDatabase } from './support/app.js';
import { ARTICLE_KEYS, call, createArticle, registerUser, type TestUser, unique } from './support/client.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describeEachDatabase('articles', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  const articleRow = (slug: string) => db().selectFrom('articles').selectAll().where('slug', '=', slug).executeTakeFirst();

  /** Tag names linked to an article in article_tags, read straight from the tables. */
  async function linkedTags(articleId: number): Promise<string[]> {
    const rows = await db()
      .selectFrom('article_tags')
      .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
      .select('tags.name')
      .where('article_tags.article_id', '=', articleId)
      .execute();
    return rows.map((row) => row.name).sort();
  }

  const tagCounter = async (name: string) =>
    (await db().selectFrom('tags').select('article_count').where('name', '=', name).executeTakeFirst())?.article_count;

  const put = (slug: string, token: string | undefined, article: unknown) =>
    call(app(), 'PUT', `/api/articles/${encodeURIComponent(slug)}`, { token, body: { article } });

  const post = (token: string | undefined, article: unknown) => call(app(), 'POST', '/api/articles', { token, body: { article } });

  const valid = (extra: Record<string, unknown> = {}) => ({ title: unique('Title '), description: 'desc', body: 'body', ...extra });

  describe('create', () => {
    it('answers 201 with the full article: sorted, trimmed, de-duplicated tags and the body', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('x');
      const response = await post(author.token, {
        title: `Hello World ${id}`,
        description: 'A description',
        body: 'The whole body\nwith two lines',
        tagList: ['zeta', '  alpha ', 'mu', 'alpha', 'beta', ' zeta'],
      });
      expect(response.status).toBe(201);
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
      const article = response.body.article;
      expect(Object.keys(response.body)).toEqual(['article']);
      expect(Object.keys(article).sort()).toEqual(ARTICLE_KEYS);
      expect(article).toEqual({
        slug: `hello-world-${id}`,
        title: `Hello World ${id}`,
        description: 'A description',
        body: 'The whole body\nwith two lines',
        tagList: ['alpha', 'beta', 'mu', 'zeta'],
        createdAt: expect.stringMatching(ISO_MS),
        updatedAt: expect.stringMatching(ISO_MS),
        favorited: false,
        favoritesCount: 0,
        author: { username: author.username, bio: null, image: null, following: false },
        status: 'published',
        publishAt: null,
        publishedAt: article.createdAt,
      });
      expect(article.updatedAt).toBe(article.createdAt);
      expect(Math.abs(Date.parse(article.createdAt) - Date.now())).toBeLessThan(60_000);

      const row = await articleRow(article.slug);
      expect(row).toBeDefined();
      expect(await linkedTags(row!.id)).toEqual(['alpha', 'beta', 'mu', 'zeta']);
    });

    it('gives an empty tagList when none is sent', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, valid());
      expect(response.status).toBe(201);
      expect(response.body.article.tagList).toEqual([]);
    });

    it('returns what GET returns afterwards', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token, { tagList: ['b', 'a'] });
      const response = await call(app(), 'GET', `/api/articles/${created.slug}`);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ article: created });
    });

    it('answers 401 without a token', async () => {
      const response = await post(undefined, valid());
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is missing'] } });
    });

    it('answers 401 for a malformed token', async () => {
      const response = await post('not-a-jwt', valid());
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
    });

    it('reports every blank or missing field at once as 422 "can\'t be blank"', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, { title: '', description: '   \t ' });
      expect(response.status).toBe(422);
      expect(response.body).toEqual({
        errors: { title: ["can't be blank"], description: ["can't be blank"], body: ["can't be blank"] },
      });
    });

    it('treats null fields as blank', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, { title: null, description: 'd', body: null });
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ errors: { title: ["can't be blank"], body: ["can't be blank"] } });
    });

    it('answers 422 when the article wrapper is missing', async () => {
      const author = await registerUser(app(), 'author');
      const response = await call(app(), 'POST', '/api/articles', { token: author.token, body: { title: 'x' } });
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ errors: { article: ["can't be blank"] } });
    });

    it('answers 422 for a field of the wrong type, naming the field', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, valid({ title: 12345, tagList: 'not-a-list' }));
      expect(response.status).toBe(422);
      expect(Object.keys(response.body.errors).sort()).toEqual(['tagList', 'title']);
      expect(await articleRow('12345')).toBeUndefined();
    });

    it('ignores unknown keys: favoritesCount, slug, author and the rest cannot be set', async () => {
      const author = await registerUser(app(), 'author');
      const victim = await registerUser(app(), 'victim');
      const id = unique('k');
      const response = await post(author.token, {
        title: `Sneaky ${id}`,
        description: 'd',
        body: 'b',
        favoritesCount: 999,
        favorited: true,
        slug: `custom-${id}`,
        author: { username: victim.username, following: true },
        createdAt: '2000-01-01T00:00:00.000Z',
        updatedAt: '2000-01-01T00:00:00.000Z',
        id: 1,
        author_id: 1,
      });
      expect(response.status).toBe(201);
      const article = response.body.article;
      expect(article.slug).toBe(`sneaky-${id}`);
      expect(article.favoritesCount).toBe(0);
      expect(article.favorited).toBe(false);
      expect(article.author).toEqual({ username: author.username, bio: null, image: null, following: false });
      expect(article.createdAt).not.toBe('2000-01-01T00:00:00.000Z');
      expect(Object.keys(article).sort()).toEqual(ARTICLE_KEYS);
      expect((await call(app(), 'GET', `/api/articles/custom-${id}`)).status).toBe(404);

      const row = await articleRow(article.slug);
      expect(row?.favorites_count).toBe(0);
      const owner = await db().selectFrom('users').select('username').where('id', '=', row!.author_id).executeTakeFirstOrThrow();
      expect(owner.username).toBe(author.username);
    });
  });

  describe('slugs', () => {
    it('keeps accented letters in the slug and finds the article by it', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('u');
      const created = await createArticle(app(), author.token, { title: `Ça va? Élève ${id}` });
      expect(created.slug).toBe(`ça-va-élève-${id}`);
      const response = await call(app(), 'GET', `/api/articles/${encodeURIComponent(created.slug)}`);
      expect(response.status).toBe(200);
      expect(response.body.article.title).toBe(`Ça va? Élève ${id}`);
    });

    it.each([
      ['punctuation', '!!! ???'],
      ['emoji', '🚀🔥'],
      ['an emoji with a variation selector', '❤️'],
    ])('falls back to "article" (suffixed when taken) for a title of only %s', async (_name, title) => {
      const author = await registerUser(app(), 'author');
      const first = await createArticle(app(), author.token, { title });
      const second = await createArticle(app(), author.token, { title });
      for (const article of [first, second]) {
        expect(article.slug).toMatch(/^article(?:-[0-9a-f]{8})?$/);
        const response = await call(app(), 'GET', `/api/articles/${encodeURIComponent(article.slug)}`);
        expect(response.status).toBe(200);
        expect(response.body.article.title).toBe(title);
      }
      expect(second.slug).not.toBe(first.slug);
    });

    it('gives a second article with the same title a distinct, suffixed slug', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('d');
      const first = await createArticle(app(), author.token, { title: `Dup Title ${id}` });
      const second = await createArticle(app(), author.token, { title: `Dup Title ${id}` });
      expect(first.slug).toBe(`dup-title-${id}`);
      expect(second.slug).toMatch(new RegExp(`^dup-title-${id}-[0-9a-f]{8}$`));
    });

    it('never gives an article a slug the router reads as one of its own paths', async () => {
      const author = await registerUser(app(), 'author');
      for (const word of ROUTE_WORDS) {
        // The word really is a path of its own, so a slug equal to it would be shadowed.
        expect(app().hasRoute({ method: 'GET', url: `/api/articles/${word}` })).toBe(true);
        const created = await post(author.token, valid({ title: word.toUpperCase() }));
        expect(created.status).toBe(201);
        expect(created.body.article.slug).not.toBe(word);
        const read = await call(app(), 'GET', `/api/articles/${created.body.article.slug}`);
        expect(read.status).toBe(200);
        expect(read.body.article.title).toBe(word.toUpperCase());
      }
    });
  });

  describe('with a frozen clock', () => {
    it('breaks createdAt ties by id, newest first', async () => {
      const author = await registerUser(app(), 'author');
      const now = Date.now();
      const clock = vi.spyOn(Date, 'now').mockReturnValue(now);
      const slugs: string[] = [];
      try {
        for (let i = 0; i < 5; i++) slugs.push((await createArticle(app(), author.token)).slug);
      } finally {
        clock.mockRestore();
      }
      const response = await call(app(), 'GET', `/api/articles?author=${author.username}`);
      expect(response.body.articlesCount).toBe(5);
      expect(response.body.articles.map((a: { slug: string }) => a.slug)).toEqual([...slugs].reverse());
      for (const article of response.body.articles) expect(article.createdAt).toBe(new Date(now).toISOString());
    });

    it('still moves updatedAt forward on every update within one millisecond', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      const clock = vi.spyOn(Date, 'now').mockReturnValue(Date.parse(created.updatedAt));
      const stamps: number[] = [Date.parse(created.updatedAt)];
      try {
        for (let i = 0; i < 3; i++) {
          const response = await put(created.slug, author.token, { body: `version ${i}` });
          expect(response.status).toBe(200);
          expect(response.body.article.createdAt).toBe(created.createdAt);
          stamps.push(Date.parse(response.body.article.updatedAt));
        }
      } finally {
        clock.mockRestore();
      }
      for (let i = 1; i < stamps.length; i++) expect(stamps[i]).toBeGreaterThan(stamps[i - 1]!);
    });
  });

  describe('limits', () => {
    it('accepts a title of 256 characters and refuses 257', async () => {
      const author = await registerUser(app(), 'author');
      const ok = await post(author.token, valid({ title: 't'.repeat(256) }));
      expect(ok.status).toBe(201);
      expect(ok.body.article.title).toBe('t'.repeat(256));
      const tooLong = await post(author.token, valid({ title: 't'.repeat(257) }));
      expect(tooLong.status).toBe(422);
      expect(Object.keys(tooLong.body.errors)).toEqual(['title']);
      expect(tooLong.body.errors.title).toEqual([expect.stringContaining('256')]);
    });

    it('counts title characters, not UTF-16 units: 256 astral characters are fine', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, valid({ title: '\u{20000}'.repeat(256) }));
      expect(response.status).toBe(201);
      expect(response.body.article.title).toBe('\u{20000}'.repeat(256));
    });

    it('accepts a description of 1024 characters and refuses 1025', async () => {
      const author = await registerUser(app(), 'author');
      expect((await post(author.token, valid({ description: 'd'.repeat(1024) }))).status).toBe(201);
      const tooLong = await post(author.token, valid({ description: 'd'.repeat(1025) }));
      expect(tooLong.status).toBe(422);
      expect(Object.keys(tooLong.body.errors)).toEqual(['description']);
    });

    it('accepts a body of 100,000 characters and refuses 100,001', async () => {
      const author = await registerUser(app(), 'author');
      const ok = await post(author.token, valid({ body: 'b'.repeat(100_000) }));
      expect(ok.status).toBe(201);
      expect(ok.body.article.body).toHaveLength(100_000);
      const tooLong = await post(author.token, valid({ body: 'b'.repeat(100_001) }));
      expect(tooLong.status).toBe(422);
      expect(Object.keys(tooLong.body.errors)).toEqual(['body']);
    });

    it('accepts 20 tags and refuses 21', async () => {
      const author = await registerUser(app(), 'author');
      const tags = Array.from({ length: 21 }, (_, i) => `t${String(i).padStart(2, '0')}-${unique('')}`);
      const ok = await post(author.token, valid({ tagList: tags.slice(0, 20) }));
      expect(ok.status).toBe(201);
      expect(ok.body.article.tagList).toEqual(tags.slice(0, 20).sort());
      const tooMany = await post(author.token, valid({ tagList: tags }));
      expect(tooMany.status).toBe(422);
      expect(Object.keys(tooMany.body.errors)).toEqual(['tagList']);
      // Nothing of the refused article reached the tables.
      expect(await tagCounter(tags[20]!)).toBeUndefined();
    });

    it('does not look inside a tag list longer than its bound: 1,000 blank tags are one message, not 1,000', async () => {
      const author = await registerUser(app(), 'author');
      const hostile = { ...valid({ tagList: new Array(1000).fill('') }), title: '' };
      const expected = { errors: { title: ["can't be blank"], tagList: ['has too many items (maximum is 20)'] } };
      const created = await post(author.token, hostile);
      expect(created.status).toBe(422);
      expect(created.body).toEqual(expected);
      // The same on someone else's article: the shape is checked first, as the contract orders, and costs as little.
      const article = await createArticle(app(), (await registerUser(app(), 'owner')).token);
      const updated = await put(article.slug, author.token, hostile);
      expect(updated.status).toBe(422);
      expect(updated.body).toEqual(expected);
    });

    it('refuses a body holding an array of more than 1,000 items before looking at any of them', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, valid({ tagList: new Array(340_000).fill('') }));
      expect([response.status, response.body]).toEqual([422, { errors: { body: ['holds an array of more than 1000 items'] } }]);
    });

    it('refuses text holding a lone surrogate, which the two databases would store differently', async () => {
      const author = await registerUser(app(), 'author');
      const INVALID = { errors: { body: ['must be valid Unicode text (a lone surrogate was sent)'] } };
      for (const broken of [{ title: 'half \ud83d' }, { body: '\ude00 alone' }, { tagList: ['ok', 'x\udbff'] }]) {
        const response = await post(author.token, valid(broken));
        expect([response.status, response.body], JSON.stringify(broken)).toEqual([422, INVALID]);
      }
      // A whole pair is one character, as it should be.
      const emoji = await post(author.token, valid({ title: 'whole \ud83d\ude00' }));
      expect([emoji.status, emoji.body.article?.title]).toEqual([201, 'whole 😀']);
    });

    it('accepts a tag of 64 characters and refuses 65', async () => {
      const author = await registerUser(app(), 'author');
      const ok = await post(author.token, valid({ tagList: ['g'.repeat(64)] }));
      expect(ok.status).toBe(201);
      expect(ok.body.article.tagList).toEqual(['g'.repeat(64)]);
      const tooLong = await post(author.token, valid({ tagList: ['ok', 'h'.repeat(65)] }));
      expect(tooLong.status).toBe(422);
      expect(Object.keys(tooLong.body.errors)).toEqual(['tagList']);
      expect(await tagCounter('h'.repeat(65))).toBeUndefined();
    });

    it('refuses a blank tag', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, valid({ tagList: ['fine', '   '] }));
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ errors: { tagList: ["can't be blank"] } });
    });

    it('refuses a tag that is not a string', async () => {
      const author = await registerUser(app(), 'author');
      const response = await post(author.token, valid({ tagList: ['fine', 7] }));
      expect(response.status).toBe(422);
      expect(Object.keys(response.body.errors)).toEqual(['tagList']);
    });
  });

  describe('get', () => {
    it('answers 404 for an unknown slug', async () => {
      const response = await call(app(), 'GET', `/api/articles/${unique('no-such-article-')}`);
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ errors: { article: ['not found'] } });
    });

    it("shows favorited and following from the viewer's point of view", async () => {
      const author = await registerUser(app(), 'author');
      const reader = await registerUser(app(), 'reader');
      const article = await createArticle(app(), author.token);
      expect((await call(app(), 'POST', `/api/profiles/${author.username}/follow`, { token: reader.token })).status).toBe(200);
      expect((await call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: reader.token })).status).toBe(200);

      const asReader = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: reader.token });
      expect(asReader.status).toBe(200);
      expect(asReader.body.article.favorited).toBe(true);
      expect(asReader.body.article.favoritesCount).toBe(1);
      expect(asReader.body.article.author.following).toBe(true);

      const anonymous = await call(app(), 'GET', `/api/articles/${article.slug}`);
      expect(anonymous.body.article.favorited).toBe(false);
      expect(anonymous.body.article.favoritesCount).toBe(1);
      expect(anonymous.body.article.author.following).toBe(false);

      const asAuthor = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: author.token });
      expect(asAuthor.body.article.favorited).toBe(false);
      expect(asAuthor.body.article.author.following).toBe(false);
    });

    it('answers 401 for a bad token even though auth is optional', async () => {
      const author = await registerUser(app(), 'author');
      const article = await createArticle(app(), author.token);
      const response = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: `${author.token}x` });
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
    });
  });

  describe('update', () => {
    it('changes only the fields sent; slug, tags, body and createdAt stay; updatedAt moves', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token, { tagList: ['keep', 'these'] });
      const response = await put(created.slug, author.token, { description: 'New description' });
      expect(response.status).toBe(200);
      expect(response.body.article).toEqual({
        ...created,
        description: 'New description',
        updatedAt: expect.stringMatching(ISO_MS),
      });
      expect(Date.parse(response.body.article.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).body).toEqual(response.body);
    });

    it('keeps the tags when tagList is omitted', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token, { tagList: ['one', 'two'] });
      const response = await put(created.slug, author.token, { body: 'new body' });
      expect(response.status).toBe(200);
      expect(response.body.article.tagList).toEqual(['one', 'two']);
      expect(response.body.article.body).toBe('new body');
      const row = await articleRow(created.slug);
      expect(await linkedTags(row!.id)).toEqual(['one', 'two']);
    });

    it('clears the tags for tagList []', async () => {
      const author = await registerUser(app(), 'author');
      const tag = unique('only-here-');
      const created = await createArticle(app(), author.token, { tagList: [tag, 'other'] });
      const row = await articleRow(created.slug);
      expect(await tagCounter(tag)).toBe(1);
      const response = await put(created.slug, author.token, { tagList: [] });
      expect(response.status).toBe(200);
      expect(response.body.article.tagList).toEqual([]);
      expect(await linkedTags(row!.id)).toEqual([]);
      expect(await tagCounter(tag)).toBe(0);
      expect((await call(app(), 'GET', '/api/tags')).body.tags).not.toContain(tag);
    });

    it('replaces the tags with a new list, trimmed, sorted and de-duplicated', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token, { tagList: ['old', 'shared'] });
      const response = await put(created.slug, author.token, { tagList: [' shared', 'new', 'new ', 'another'] });
      expect(response.status).toBe(200);
      expect(response.body.article.tagList).toEqual(['another', 'new', 'shared']);
      const row = await articleRow(created.slug);
      expect(await linkedTags(row!.id)).toEqual(['another', 'new', 'shared']);
    });

    it('answers 422 for tagList null and keeps the tags', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token, { tagList: ['stay'] });
      const response = await put(created.slug, author.token, { tagList: null });
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ errors: { tagList: ["can't be blank"] } });
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).body.article.tagList).toEqual(['stay']);
    });

    it.each(['title', 'description', 'body'])('answers 422 for a blank %s and changes nothing', async (field) => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      for (const blank of ['', '   ', null]) {
        const response = await put(created.slug, author.token, { [field]: blank });
        expect(response.status).toBe(422);
        expect(response.body).toEqual({ errors: { [field]: ["can't be blank"] } });
      }
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).body.article).toEqual(created);
    });

    it('moves updatedAt on each of two updates in quick succession; createdAt never moves', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      const first = await put(created.slug, author.token, { body: 'first' });
      const second = await put(created.slug, author.token, { body: 'second' });
      const third = await put(created.slug, author.token, { body: 'second' });
      for (const response of [first, second, third]) {
        expect(response.status).toBe(200);
        expect(response.body.article.createdAt).toBe(created.createdAt);
      }
      const times = [created, first.body.article, second.body.article, third.body.article].map((a) => Date.parse(a.updatedAt));
      expect(times[1]).toBeGreaterThan(times[0]!);
      expect(times[2]).toBeGreaterThan(times[1]!);
      expect(times[3]).toBeGreaterThan(times[2]!);
    });

    it('regenerates the slug when the title changes; the old slug is gone', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('s');
      const created = await createArticle(app(), author.token, { title: `Old Title ${id}` });
      expect(created.slug).toBe(`old-title-${id}`);
      const response = await put(created.slug, author.token, { title: `Brand New Title ${id}` });
      expect(response.status).toBe(200);
      expect(response.body.article.slug).toBe(`brand-new-title-${id}`);
      expect(response.body.article.title).toBe(`Brand New Title ${id}`);
      expect(response.body.article.createdAt).toBe(created.createdAt);
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).status).toBe(404);
      const moved = await call(app(), 'GET', `/api/articles/brand-new-title-${id}`);
      expect(moved.status).toBe(200);
      expect(moved.body.article.title).toBe(`Brand New Title ${id}`);
    });

    it("gives a distinct slug when the new title's slug is taken by another article", async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('t');
      const taken = await createArticle(app(), author.token, { title: `Taken ${id}` });
      const other = await createArticle(app(), author.token, { title: `Other ${id}` });
      const response = await put(other.slug, author.token, { title: `Taken ${id}` });
      expect(response.status).toBe(200);
      expect(response.body.article.slug).not.toBe(taken.slug);
      expect(response.body.article.slug.startsWith(`taken-${id}`)).toBe(true);
      expect((await call(app(), 'GET', `/api/articles/${taken.slug}`)).body.article.description).toBe(taken.description);
    });

    it('keeps the slug when the title is omitted or unchanged', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      const omitted = await put(created.slug, author.token, { body: 'changed' });
      expect(omitted.body.article.slug).toBe(created.slug);
      const same = await put(created.slug, author.token, { title: created.title });
      expect(same.status).toBe(200);
      expect(same.body.article.slug).toBe(created.slug);
    });

    it('ignores unknown keys on update', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      const response = await put(created.slug, author.token, {
        body: 'real change',
        slug: unique('hijack-'),
        favoritesCount: 42,
        createdAt: '2000-01-01T00:00:00.000Z',
        author: { username: 'someone-else' },
      });
      expect(response.status).toBe(200);
      expect(response.body.article).toMatchObject({
        slug: created.slug,
        favoritesCount: 0,
        createdAt: created.createdAt,
        body: 'real change',
        author: created.author,
      });
    });

    it('answers a new article exactly as a read of it answers, tags and author profile included', async () => {
      const author = await registerUser(app(), 'author');
      const profile = { bio: 'Writes things', image: 'https://example.com/me.png' };
      expect((await call(app(), 'PUT', '/api/user', { token: author.token, body: { user: profile } })).status).toBe(200);
      const created = await createArticle(app(), author.token, { tagList: [' zeta', 'Alpha', 'zeta', 'émoji 🐉', 'beta '] });
      expect(created.tagList).toEqual(['Alpha', 'beta', 'zeta', 'émoji 🐉']);
      expect(created.author).toEqual({ username: author.username, ...profile, following: false });
      const read = await call(app(), 'GET', `/api/articles/${created.slug}`, { token: author.token });
      expect(read.body.article).toEqual(created);
    });

    it("answers 403 for another user's article and changes nothing", async () => {
      const author = await registerUser(app(), 'author');
      const intruder = await registerUser(app(), 'intruder');
      const created = await createArticle(app(), author.token, { tagList: ['x'] });
      const response = await put(created.slug, intruder.token, { title: 'Hijacked', tagList: [] });
      expect(response.status).toBe(403);
      expect(response.body).toEqual({ errors: { article: ['forbidden'] } });
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).body.article).toEqual(created);
    });

    it('accepts an empty change set and still moves updatedAt', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      const response = await put(created.slug, author.token, {});
      expect(response.status).toBe(200);
      expect(response.body.article).toEqual({ ...created, updatedAt: expect.stringMatching(ISO_MS) });
      expect(Date.parse(response.body.article.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));
    });
  });

  describe('delete', () => {
    it('answers 204 with an empty body and removes comments, favorites and tag links', async () => {
      const author = await registerUser(app(), 'author');
      const fan = await registerUser(app(), 'fan');
      const tag = unique('gone-');
      const shared = unique('shared-');
      const doomed = await createArticle(app(), author.token, { tagList: [tag, shared] });
      const survivor = await createArticle(app(), author.token, { tagList: [shared] });
      for (const user of [author, fan]) {
        expect((await call(app(), 'POST', `/api/articles/${doomed.slug}/favorite`, { token: user.token })).status).toBe(200);
        const comment = await call(app(), 'POST', `/api/articles/${doomed.slug}/comments`, {
          token: user.token,
          body: { comment: { body: 'a comment' } },
        });
        expect(comment.status).toBe(201);
      }
      expect((await call(app(), 'POST', `/api/articles/${survivor.slug}/favorite`, { token: fan.token })).status).toBe(200);
      const row = await articleRow(doomed.slug);
      expect(row).toBeDefined();
      const articleId = row!.id;
      expect(await tagCounter(shared)).toBe(2);

      const response = await app().inject({
        method: 'DELETE',
        url: `/api/articles/${doomed.slug}`,
        headers: { authorization: `Token ${author.token}` },
      });
      expect(response.statusCode).toBe(204);
      expect(response.body).toBe('');

      expect(await articleRow(doomed.slug)).toBeUndefined();
      expect(await db().selectFrom('comments').select('id').where('article_id', '=', articleId).execute()).toEqual([]);
      expect(await db().selectFrom('favorites').select('user_id').where('article_id', '=', articleId).execute()).toEqual([]);
      expect(await db().selectFrom('article_tags').select('tag_id').where('article_id', '=', articleId).execute()).toEqual([]);
      expect(await tagCounter(tag)).toBe(0);
      expect(await tagCounter(shared)).toBe(1);

      const get = await call(app(), 'GET', `/api/articles/${doomed.slug}`);
      expect(get.status).toBe(404);
      expect(get.body).toEqual({ errors: { article: ['not found'] } });
      const comments = await call(app(), 'GET', `/api/articles/${doomed.slug}/comments`);
      expect(comments.status).toBe(404);

      // The other article keeps its favorite and its tag.
      const other = await call(app(), 'GET', `/api/articles/${survivor.slug}`, { token: fan.token });
      expect(other.body.article).toMatchObject({ favorited: true, favoritesCount: 1, tagList: [shared] });
      const favorites = await call(app(), 'GET', `/api/articles?favorited=${fan.username}`);
      expect(favorites.body.articles.map((a: { slug: string }) => a.slug)).toEqual([survivor.slug]);
      expect(favorites.body.articlesCount).toBe(1);
      const byTag = await call(app(), 'GET', `/api/articles?tag=${tag}`);
      expect(byTag.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
    });

    it('answers 404 for a second delete', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      expect((await call(app(), 'DELETE', `/api/articles/${created.slug}`, { token: author.token })).status).toBe(204);
      const again = await call(app(), 'DELETE', `/api/articles/${created.slug}`, { token: author.token });
      expect(again.status).toBe(404);
      expect(again.body).toEqual({ errors: { article: ['not found'] } });
    });

    it("answers 403 for another user's article and keeps it", async () => {
      const author = await registerUser(app(), 'author');
      const intruder = await registerUser(app(), 'intruder');
      const created = await createArticle(app(), author.token);
      const response = await call(app(), 'DELETE', `/api/articles/${created.slug}`, { token: intruder.token });
      expect(response.status).toBe(403);
      expect(response.body).toEqual({ errors: { article: ['forbidden'] } });
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).status).toBe(200);
    });

    it('answers 401 without a token', async () => {
      const author = await registerUser(app(), 'author');
      const created = await createArticle(app(), author.token);
      const response = await call(app(), 'DELETE', `/api/articles/${created.slug}`);
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is missing'] } });
      expect((await call(app(), 'GET', `/api/articles/${created.slug}`)).status).toBe(200);
    });

    it('frees the slug for a new article with the same title', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('r');
      const first = await createArticle(app(), author.token, { title: `Reused ${id}` });
      expect((await call(app(), 'DELETE', `/api/articles/${first.slug}`, { token: author.token })).status).toBe(204);
      const second = await createArticle(app(), author.token, { title: `Reused ${id}` });
      expect(second.slug).toBe(`reused-${id}`);
      expect(second.favoritesCount).toBe(0);
      expect((await call(app(), 'GET', `/api/articles/${second.slug}/comments`)).body).toEqual({ comments: [] });
    });
  });

  describe('order of checks: 401, then 422, then 404, then 403', () => {
    let author: TestUser;
    let other: TestUser;
    let slug: string;
    const unknown = () => unique('unknown-slug-');

    beforeAll(async () => {
      author = await registerUser(app(), 'author');
      other = await registerUser(app(), 'other');
      slug = (await createArticle(app(), author.token)).slug;
    });

    it('401 before 422 and 404 on update', async () => {
      const missing = await put(unknown(), undefined, { title: '' });
      expect(missing.status).toBe(401);
      expect(missing.body).toEqual({ errors: { token: ['is missing'] } });
      const invalid = await put(unknown(), 'garbage.token.here', { title: '' });
      expect(invalid.status).toBe(401);
      expect(invalid.body).toEqual({ errors: { token: ['is invalid'] } });
    });

    it('422 before 404: an invalid body on an unknown slug', async () => {
      const response = await put(unknown(), author.token, { title: '' });
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ errors: { title: ["can't be blank"] } });
    });

    it('404 for a valid body on an unknown slug', async () => {
      const response = await put(unknown(), author.token, { title: 'Fine' });
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ errors: { article: ['not found'] } });
    });

    it("422 before 403: an invalid body on another user's article", async () => {
      const response = await put(slug, other.token, { body: '  ' });
      expect(response.status).toBe(422);
      expect(response.body).toEqual({ errors: { body: ["can't be blank"] } });
    });

    it("403 for a valid body on another user's article", async () => {
      const response = await put(slug, other.token, { body: 'fine' });
      expect(response.status).toBe(403);
      expect(response.body).toEqual({ errors: { article: ['forbidden'] } });
    });

    it('401, then 404, then 403 on delete', async () => {
      expect((await call(app(), 'DELETE', `/api/articles/${unknown()}`)).status).toBe(401);
      const notFound = await call(app(), 'DELETE', `/api/articles/${unknown()}`, { token: other.token });
      expect(notFound.status).toBe(404);
      expect(notFound.body).toEqual({ errors: { article: ['not found'] } });
      const forbidden = await call(app(), 'DELETE', `/api/articles/${slug}`, { token: other.token });
      expect(forbidden.status).toBe(403);
      expect(forbidden.body).toEqual({ errors: { article: ['forbidden'] } });
    });

    it('401 before 422 on create', async () => {
      const response = await post(undefined, { title: '' });
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is missing'] } });
    });
  });
});
