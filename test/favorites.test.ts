import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

describeEachDatabase('favorites', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  const favorite = (slug: string, token?: string) => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token });
  const unfavorite = (slug: string, token?: string) => call(app(), 'DELETE', `/api/articles/${slug}/favorite`, { token });

  /** Rows in favorites and the stored counter, straight from the tables. */
  async function stored(slug: string) {
    const article = await db().selectFrom('articles').select(['id', 'favorites_count']).where('slug', '=', slug).executeTakeFirstOrThrow();
    const rows = await db().selectFrom('favorites').select('user_id').where('article_id', '=', article.id).execute();
    return { rows: rows.length, counter: article.favorites_count };
  }

  it('favorites an article: 200 with the full article, favorited and counted', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const article = await createArticle(app(), author.token, { tagList: ['t'] });
    const response = await favorite(article.slug, reader.token);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      article: { ...article, favorited: true, favoritesCount: 1 },
    });
    expect(await stored(article.slug)).toEqual({ rows: 1, counter: 1 });
  });

  it('is idempotent: favoriting twice counts once, unfavoriting twice leaves zero', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const article = await createArticle(app(), author.token);

    for (let i = 0; i < 2; i++) {
      const response = await favorite(article.slug, reader.token);
      expect(response.status).toBe(200);
      expect(response.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
    }
    expect(await stored(article.slug)).toEqual({ rows: 1, counter: 1 });

    for (let i = 0; i < 2; i++) {
      const response = await unfavorite(article.slug, reader.token);
      expect(response.status).toBe(200);
      expect(response.body.article).toMatchObject({ favorited: false, favoritesCount: 0 });
    }
    expect(await stored(article.slug)).toEqual({ rows: 0, counter: 0 });
  });

  it('unfavoriting an article never favorited leaves the count at zero', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const article = await createArticle(app(), author.token);
    const response = await unfavorite(article.slug, reader.token);
    expect(response.status).toBe(200);
    expect(response.body.article).toMatchObject({ favorited: false, favoritesCount: 0 });
    expect(await stored(article.slug)).toEqual({ rows: 0, counter: 0 });
  });

  it('keeps favoritesCount equal to the rows in favorites through a mix of users and repeats', async () => {
    const author = await registerUser(app(), 'author');
    const users = await Promise.all([1, 2, 3, 4].map(() => registerUser(app(), 'fan')));
    const article = await createArticle(app(), author.token);
    const steps: Array<[number, 'fav' | 'unfav']> = [
      [0, 'fav'],
      [1, 'fav'],
      [1, 'fav'],
      [2, 'fav'],
      [3, 'unfav'],
      [0, 'unfav'],
      [3, 'fav'],
      [2, 'fav'],
      [0, 'unfav'],
    ];
    const favorited = new Set<number>();
    for (const [who, action] of steps) {
      const user = users[who]!;
      const response = action === 'fav' ? await favorite(article.slug, user.token) : await unfavorite(article.slug, user.token);
      if (action === 'fav') favorited.add(who);
      else favorited.delete(who);
      expect(response.status).toBe(200);
      expect(response.body.article.favoritesCount).toBe(favorited.size);
      expect(response.body.article.favorited).toBe(action === 'fav');
      expect(await stored(article.slug)).toEqual({ rows: favorited.size, counter: favorited.size });
    }
    expect(favorited.size).toBe(3);
    const anonymous = await call(app(), 'GET', `/api/articles/${article.slug}`);
    expect(anonymous.body.article).toMatchObject({ favorited: false, favoritesCount: 3 });
  });

  it('shows favorited only to the users who favorited', async () => {
    const author = await registerUser(app(), 'author');
    const liker = await registerUser(app(), 'liker');
    const other = await registerUser(app(), 'other');
    const article = await createArticle(app(), author.token);
    expect((await favorite(article.slug, liker.token)).status).toBe(200);
    const asLiker = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: liker.token });
    const asOther = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: other.token });
    expect(asLiker.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
    expect(asOther.body.article).toMatchObject({ favorited: false, favoritesCount: 1 });
  });

  it('lets authors favorite their own article', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await favorite(article.slug, author.token);
    expect(response.status).toBe(200);
    expect(response.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
  });

  it('answers 404 for an unknown slug on favorite and unfavorite', async () => {
    const reader = await registerUser(app(), 'reader');
    for (const request of [favorite, unfavorite]) {
      const response = await request(unique('unknown-slug-'), reader.token);
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ errors: { article: ['not found'] } });
    }
  });

  it('answers 401 without a token, and changes nothing', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    for (const request of [favorite, unfavorite]) {
      const response = await request(article.slug);
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is missing'] } });
    }
    expect(await stored(article.slug)).toEqual({ rows: 0, counter: 0 });
  });

  it('answers 401 without a token even for an unknown slug (401 before 404)', async () => {
    const response = await favorite(unique('unknown-slug-'));
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ errors: { token: ['is missing'] } });
  });

  it('answers 401 for an invalid token', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await favorite(article.slug, 'invalid-token');
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
  });

  it('works with Content-Type: application/json and an empty body, for POST and DELETE', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const article = await createArticle(app(), author.token);
    const headers = { authorization: `Token ${reader.token}`, 'content-type': 'application/json' };

    const post = await app().inject({ method: 'POST', url: `/api/articles/${article.slug}/favorite`, headers, payload: '' });
    expect(post.statusCode).toBe(200);
    expect(post.json().article).toMatchObject({ slug: article.slug, favorited: true, favoritesCount: 1 });

    const del = await app().inject({ method: 'DELETE', url: `/api/articles/${article.slug}/favorite`, headers, payload: '' });
    expect(del.statusCode).toBe(200);
    expect(del.json().article).toMatchObject({ slug: article.slug, favorited: false, favoritesCount: 0 });
    expect(await stored(article.slug)).toEqual({ rows: 0, counter: 0 });
  });

  it('works with Content-Type: application/json and an empty JSON object as body', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const article = await createArticle(app(), author.token);
    const response = await call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: reader.token, body: {} });
    expect(response.status).toBe(200);
    expect(response.body.article.favoritesCount).toBe(1);
  });

  it('keeps favorites of other articles apart', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const first = await createArticle(app(), author.token);
    const second = await createArticle(app(), author.token);
    expect((await favorite(first.slug, reader.token)).status).toBe(200);
    expect((await unfavorite(second.slug, reader.token)).status).toBe(200);
    expect(await stored(first.slug)).toEqual({ rows: 1, counter: 1 });
    expect(await stored(second.slug)).toEqual({ rows: 0, counter: 0 });
    const list = await call(app(), 'GET', `/api/articles?favorited=${reader.username}`);
    expect(list.body.articlesCount).toBe(1);
    expect(list.body.articles.map((a: { slug: string }) => a.slug)).toEqual([first.slug]);
  });
});
