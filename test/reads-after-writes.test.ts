import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { describeEachDatabase, testConfig } from './support/app.js';
import { call, createArticle, registerUser, type TestUser, unique } from './support/client.js';

/**
 * Every kind of write, seen by another process: each write goes through one app; every read goes through another
 * app on the same database, right after that second app has read the state before the write (twice, so that any
 * cache a future change adds would be warm and caught serving the old state).
 */
describeEachDatabase('reads on another instance after every kind of write', (ctx) => {
  let reader: FastifyInstance;
  let author: TestUser;
  let fan: TestUser;
  let slug: string;
  const writer = () => ctx().app;

  beforeAll(async () => {
    reader = await buildApp(testConfig(ctx().databaseUrl), { migrate: false });
    author = await registerUser(writer(), 'cached-author');
    fan = await registerUser(writer(), 'cached-fan');
    slug = (await createArticle(writer(), author.token, { tagList: ['cache-a'] })).slug;
  });

  afterAll(() => reader.close());

  /** Reads `url` on the reader twice, runs `write` on the writer, then returns the reader's new answer. */
  async function afterWrite(url: string, token: string | undefined, write: () => Promise<{ status: number }>) {
    await call(reader, 'GET', url, { token });
    const before = await call(reader, 'GET', url, { token });
    expect(before.status).toBe(200);
    expect([200, 201, 204]).toContain((await write()).status);
    const after = await call(reader, 'GET', url, { token });
    expect(after.status).toBe(200);
    return { before: before.body, after: after.body };
  }

  it('an article created elsewhere appears in the list and under its tag', async () => {
    const tag = unique('fresh');
    const { before, after } = await afterWrite(`/api/articles?tag=${tag}`, undefined, () =>
      call(writer(), 'POST', '/api/articles', {
        token: author.token,
        body: { article: { title: unique('New '), description: 'd', body: 'b', tagList: [tag] } },
      }),
    );
    expect(before.articlesCount).toBe(0);
    expect(after.articlesCount).toBe(1);
    expect((await call(reader, 'GET', '/api/tags')).body.tags).toContain(tag);
  });

  it('a favorite shows in the count, the favorited list and the viewer flag', async () => {
    const counts = await afterWrite(`/api/articles/${slug}`, fan.token, () =>
      call(writer(), 'POST', `/api/articles/${slug}/favorite`, { token: fan.token }),
    );
    expect(counts.after.article.favoritesCount).toBe(counts.before.article.favoritesCount + 1);
    expect(counts.after.article.favorited).toBe(true);
    const list = await afterWrite(`/api/articles?favorited=${fan.username}`, undefined, () =>
      call(writer(), 'DELETE', `/api/articles/${slug}/favorite`, { token: fan.token }),
    );
    expect(list.before.articlesCount).toBe(1);
    expect(list.after).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
  });

  it('a follow and an unfollow change the feed', async () => {
    const followed = await afterWrite('/api/articles/feed', fan.token, () =>
      call(writer(), 'POST', `/api/profiles/${author.username}/follow`, { token: fan.token }),
    );
    expect(followed.before.articlesCount).toBe(0);
    expect(followed.after.articlesCount).toBeGreaterThan(0);
    expect(followed.after.articles[0].author.following).toBe(true);
    const unfollowed = await afterWrite('/api/articles/feed', fan.token, () =>
      call(writer(), 'DELETE', `/api/profiles/${author.username}/follow`, { token: fan.token }),
    );
    expect(unfollowed.after.articlesCount).toBe(0);
  });

  it("an author's new bio and name show on their articles", async () => {
    const bio = unique('bio ');
    const { after } = await afterWrite(`/api/articles/${slug}`, undefined, () =>
      call(writer(), 'PUT', '/api/user', { token: author.token, body: { user: { bio } } }),
    );
    expect(after.article.author.bio).toBe(bio);
    const username = unique('renamed');
    const renamed = await afterWrite(`/api/articles?limit=100`, undefined, () =>
      call(writer(), 'PUT', '/api/user', { token: author.token, body: { user: { username } } }),
    );
    const mine = renamed.after.articles.find((article: { slug: string }) => article.slug === slug);
    expect(mine.author.username).toBe(username);
  });

  it("comments added and deleted elsewhere, their author's new name and a follow show in the comment list", async () => {
    const onPost = (await createArticle(writer(), author.token)).slug;
    const url = `/api/articles/${onPost}/comments`;
    let id = 0;
    const added = await afterWrite(url, undefined, async () => {
      const response = await call(writer(), 'POST', url, { token: fan.token, body: { comment: { body: 'first!' } } });
      id = response.body.comment.id;
      return response;
    });
    expect(added.before.comments).toEqual([]);
    expect(added.after.comments).toMatchObject([{ id, body: 'first!', author: { username: fan.username, following: false } }]);

    const followed = await afterWrite(url, author.token, () =>
      call(writer(), 'POST', `/api/profiles/${fan.username}/follow`, { token: author.token }),
    );
    expect(followed.before.comments[0].author.following).toBe(false);
    expect(followed.after.comments[0].author.following).toBe(true);

    const bio = unique('commenter ');
    const renamed = await afterWrite(url, undefined, () =>
      call(writer(), 'PUT', '/api/user', { token: fan.token, body: { user: { bio } } }),
    );
    expect(renamed.after.comments[0].author.bio).toBe(bio);

    const deleted = await afterWrite(url, undefined, () => call(writer(), 'DELETE', `${url}/${id}`, { token: fan.token }));
    expect(deleted.after.comments).toEqual([]);

    expect((await call(reader, 'GET', url)).status).toBe(200);
    expect((await call(writer(), 'DELETE', `/api/articles/${onPost}`, { token: author.token })).status).toBe(204);
    expect((await call(reader, 'GET', url)).status).toBe(404);
  });

  it("a write's own answer shows the write, even right after the viewer's read of the same article", async () => {
    const own = (await createArticle(writer(), author.token)).slug;
    const url = `/api/articles/${own}`;
    const readTwice = async () => {
      await call(writer(), 'GET', url, { token: fan.token });
      return (await call(writer(), 'GET', url, { token: fan.token })).body.article;
    };
    expect(await readTwice()).toMatchObject({ favorited: false, favoritesCount: 0 });
    const favorited = await call(writer(), 'POST', `${url}/favorite`, { token: fan.token });
    expect(favorited.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
    expect(await readTwice()).toMatchObject({ favorited: true, favoritesCount: 1 });
    const unfavorited = await call(writer(), 'DELETE', `${url}/favorite`, { token: fan.token });
    expect(unfavorited.body.article).toMatchObject({ favorited: false, favoritesCount: 0 });

    await call(writer(), 'GET', url, { token: author.token });
    const edited = await call(writer(), 'PUT', url, { token: author.token, body: { article: { description: 'edited now' } } });
    expect(edited.body.article.description).toBe('edited now');
  });

  it('an edit changes the article and its tags; a delete removes it', async () => {
    const edited = await afterWrite(`/api/articles/${slug}`, undefined, () =>
      call(writer(), 'PUT', `/api/articles/${slug}`, {
        token: author.token,
        body: { article: { description: 'changed', tagList: ['cache-b'] } },
      }),
    );
    expect(edited.after.article).toMatchObject({ description: 'changed', tagList: ['cache-b'] });
    expect((await call(reader, 'GET', '/api/tags')).body.tags).not.toContain('cache-a');

    const listed = await afterWrite('/api/articles?limit=100', undefined, () =>
      call(writer(), 'DELETE', `/api/articles/${slug}`, { token: author.token }),
    );
    expect(listed.after.articlesCount).toBe(listed.before.articlesCount - 1);
    expect(listed.after.articles.map((article: { slug: string }) => article.slug)).not.toContain(slug);
    expect((await call(reader, 'GET', `/api/articles/${slug}`)).status).toBe(404);
  });
});
