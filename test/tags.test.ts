import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

describeEachDatabase('tags', (ctx) => {
  const app = () => ctx().app;

  /** The tags list, keeping only the tags a test made (all share one prefix), in the order the API gave. */
  const tagsWith = async (prefix: string) => {
    const response = await call(app(), 'GET', '/api/tags');
    expect(response.status).toBe(200);
    return (response.body.tags as string[]).filter((tag) => tag.startsWith(prefix));
  };

  const storedCount = async (name: string) =>
    (await app().db.selectFrom('tags').select('article_count').where('name', '=', name).executeTakeFirst())?.article_count;

  const deleteArticle = async (token: string, slug: string) => {
    const response = await call(app(), 'DELETE', `/api/articles/${slug}`, { token });
    expect(response.status).toBe(204);
  };

  const setTags = async (token: string, slug: string, tagList: string[]) => {
    const response = await call(app(), 'PUT', `/api/articles/${slug}`, { token, body: { article: { tagList } } });
    expect(response.status).toBe(200);
    return response.body.article;
  };

  // Runs first, on the file's fresh database.
  it('lists no tags while there are no articles', async () => {
    const response = await call(app(), 'GET', '/api/tags');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ tags: [] });
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('lists the tags of articles, most used first, then by name', async () => {
    const author = await registerUser(app());
    const p = unique('t');
    await createArticle(app(), author.token, { tagList: [`${p}-b`, `${p}-c`, `${p}-a`] });
    await createArticle(app(), author.token, { tagList: [`${p}-c`, `${p}-b`] });
    await createArticle(app(), author.token, { tagList: [`${p}-c`] });
    await createArticle(app(), author.token, { tagList: [`${p}-d`] });
    // c: 3, b: 2, then a and d with 1 each, by name.
    expect(await tagsWith(p)).toEqual([`${p}-c`, `${p}-b`, `${p}-a`, `${p}-d`]);
  });

  it('orders tags used equally often by name', async () => {
    const author = await registerUser(app());
    const p = unique('n');
    await createArticle(app(), author.token, { tagList: [`${p}-zeta`, `${p}-mid`] });
    await createArticle(app(), author.token, { tagList: [`${p}-alpha`] });
    expect(await tagsWith(p)).toEqual([`${p}-alpha`, `${p}-mid`, `${p}-zeta`]);
  });

  it("orders equally used tags, and an article's tags, by code point on both databases, and sends names with quotes and backslashes intact", async () => {
    const author = await registerUser(app());
    const p = unique('c');
    // UTF-16 order would put the emoji (a surrogate pair, 0xD83D...) before the fullwidth letter (0xFF5A).
    const names = [`${p}-😀`, `${p}-ｚ`, `${p}-中`, `${p}-é`, `${p}-a`, `${p}-Z`, `${p}-say "hi" \\ bye`];
    const inCodePointOrder = [`${p}-Z`, `${p}-a`, `${p}-say "hi" \\ bye`, `${p}-é`, `${p}-中`, `${p}-ｚ`, `${p}-😀`];
    const article = await createArticle(app(), author.token, { tagList: names });
    expect(article.tagList).toEqual(inCodePointOrder);
    expect(await tagsWith(p)).toEqual(inCodePointOrder);
  });

  it('counts a tag once per article even when it is repeated or padded with spaces', async () => {
    const author = await registerUser(app());
    const p = unique('d');
    await createArticle(app(), author.token, { tagList: [`${p}-dup`, ` ${p}-dup `, `${p}-dup`, `${p}-dup  `] });
    await createArticle(app(), author.token, { tagList: [`${p}-aaa`] });
    await createArticle(app(), author.token, { tagList: [`${p}-aaa`] });
    expect(await tagsWith(p)).toEqual([`${p}-aaa`, `${p}-dup`]);
    expect(await storedCount(`${p}-dup`)).toBe(1);
    expect(await storedCount(`${p}-aaa`)).toBe(2);
  });

  it('lists tags across authors and needs no token', async () => {
    const one = await registerUser(app());
    const two = await registerUser(app());
    const p = unique('x');
    await createArticle(app(), one.token, { tagList: [`${p}-shared`] });
    await createArticle(app(), two.token, { tagList: [`${p}-shared`, `${p}-own`] });
    expect(await tagsWith(p)).toEqual([`${p}-shared`, `${p}-own`]);
    expect((await call(app(), 'GET', '/api/tags', { token: one.token })).status).toBe(200);
  });

  it('ignores a token, even a bad one: the tag list takes no auth', async () => {
    const author = await registerUser(app());
    const p = unique('any');
    await createArticle(app(), author.token, { tagList: [`${p}-tag`] });
    const anonymous = await call(app(), 'GET', '/api/tags');
    for (const authorization of ['Token not-a-jwt', 'Basic dXNlcjpwYXNz', `Token ${author.token}`]) {
      const response = await call(app(), 'GET', '/api/tags', { headers: { authorization } });
      expect(response.status, authorization).toBe(200);
      expect(response.body, authorization).toEqual(anonymous.body);
    }
  });

  it('drops a tag when the last article carrying it is deleted', async () => {
    const author = await registerUser(app());
    const p = unique('del');
    const first = await createArticle(app(), author.token, { tagList: [`${p}-gone`, `${p}-kept`] });
    const second = await createArticle(app(), author.token, { tagList: [`${p}-gone`] });
    await createArticle(app(), author.token, { tagList: [`${p}-kept`] });
    expect(await tagsWith(p)).toEqual([`${p}-gone`, `${p}-kept`]);

    await deleteArticle(author.token, first.slug);
    expect(await tagsWith(p)).toEqual([`${p}-gone`, `${p}-kept`]);
    expect(await storedCount(`${p}-gone`)).toBe(1);

    await deleteArticle(author.token, second.slug);
    expect(await tagsWith(p)).toEqual([`${p}-kept`]);
    expect((await storedCount(`${p}-gone`)) ?? 0).toBe(0);
    const tagged = await call(app(), 'GET', `/api/articles?tag=${p}-gone`);
    expect(tagged.body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
  });

  it('drops a tag when its only article is updated to tagList []', async () => {
    const author = await registerUser(app());
    const p = unique('clr');
    const article = await createArticle(app(), author.token, { tagList: [`${p}-one`, `${p}-two`] });
    expect(await tagsWith(p)).toEqual([`${p}-one`, `${p}-two`]);

    const updated = await setTags(author.token, article.slug, []);
    expect(updated.tagList).toEqual([]);
    expect(await tagsWith(p)).toEqual([]);

    // Clearing again changes nothing and never drives a counter below zero.
    await setTags(author.token, article.slug, []);
    expect((await storedCount(`${p}-one`)) ?? 0).toBe(0);
    expect(await tagsWith(p)).toEqual([]);
  });

  it('swaps tags in the list when an article replaces its tagList', async () => {
    const author = await registerUser(app());
    const p = unique('swap');
    const article = await createArticle(app(), author.token, { tagList: [`${p}-old`, `${p}-both`] });
    await setTags(author.token, article.slug, [`${p}-both`, `${p}-new`]);
    expect(await tagsWith(p)).toEqual([`${p}-both`, `${p}-new`]);
    expect(await storedCount(`${p}-both`)).toBe(1);
    expect(await storedCount(`${p}-new`)).toBe(1);
    expect((await storedCount(`${p}-old`)) ?? 0).toBe(0);
  });

  it('keeps the tags when an update leaves tagList out', async () => {
    const author = await registerUser(app());
    const p = unique('keep');
    const article = await createArticle(app(), author.token, { tagList: [`${p}-stay`] });
    const response = await call(app(), 'PUT', `/api/articles/${article.slug}`, {
      token: author.token,
      body: { article: { title: unique('Renamed ') } },
    });
    expect(response.status).toBe(200);
    expect(response.body.article.tagList).toEqual([`${p}-stay`]);
    expect(await tagsWith(p)).toEqual([`${p}-stay`]);
    expect(await storedCount(`${p}-stay`)).toBe(1);
  });

  it('lists a dropped tag again once an article carries it again', async () => {
    const author = await registerUser(app());
    const p = unique('back');
    const article = await createArticle(app(), author.token, { tagList: [`${p}-again`] });
    await deleteArticle(author.token, article.slug);
    expect(await tagsWith(p)).toEqual([]);
    await createArticle(app(), author.token, { tagList: [`${p}-again`] });
    expect(await tagsWith(p)).toEqual([`${p}-again`]);
    expect(await storedCount(`${p}-again`)).toBe(1);
  });
});
