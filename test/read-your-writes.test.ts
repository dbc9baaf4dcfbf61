import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { describeEachDatabase, type TestContext, testConfig } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

/**
 * Two instances on one database: whatever one acknowledges, a read on the other made right after sees. Each read on
 * the other instance is made once before the write too, so that anything a future change caches there is in place
 * when the write lands.
 */
function readYourWrites(ctx: () => TestContext) {
  let other: FastifyInstance;
  const writer = () => ctx().app;

  beforeAll(async () => {
    other = await buildApp(testConfig(ctx().databaseUrl), { migrate: false });
  });

  afterAll(() => other.close());

  /** GET on the other instance; fails the test unless it answers 200. */
  async function read(url: string, token?: string) {
    const response = await call(other, 'GET', url, { token });
    expect(response.status, `GET ${url}`).toBe(200);
    return response.body;
  }

  /** Reads each of `reads` on the other instance, makes the write, then returns what each read shows now. */
  async function primedThen<T extends Record<string, () => Promise<unknown>>>(reads: T, write: () => Promise<unknown>) {
    for (const load of Object.values(reads)) await load();
    await write();
    const after: Record<string, unknown> = {};
    for (const [name, load] of Object.entries(reads)) after[name] = await load();
    return after as { [K in keyof T]: Awaited<ReturnType<T[K]>> };
  }

  async function write(method: 'POST' | 'PUT' | 'DELETE', url: string, token: string, body?: unknown) {
    const response = await call(writer(), method, url, { token, body });
    expect(response.status, `${method} ${url}`).toBeLessThan(300);
    return response.body;
  }

  const slugsOf = (answer: { articles: Array<{ slug: string }> }) => answer.articles.map((article) => article.slug);

  it('register and update a user', async () => {
    const user = await registerUser(writer(), 'ryw');
    expect((await read(`/api/profiles/${user.username}`)).profile.username).toBe(user.username);
    expect((await read('/api/user', user.token)).user.email).toBe(user.email);
    const { slug } = await createArticle(writer(), user.token);

    const bio = unique('bio ');
    const after = await primedThen(
      {
        profile: async () => (await read(`/api/profiles/${user.username}`)).profile.bio,
        account: async () => (await read('/api/user', user.token)).user.bio,
        article: async () => (await read(`/api/articles/${slug}`)).article.author.bio,
        list: async () => (await read(`/api/articles?author=${user.username}`)).articles[0].author.bio,
      },
      () => write('PUT', '/api/user', user.token, { user: { bio } }),
    );
    expect(after).toEqual({ profile: bio, account: bio, article: bio, list: bio });
  });

  it('follow and unfollow', async () => {
    const [author, reader] = [await registerUser(writer(), 'rywauthor'), await registerUser(writer(), 'rywreader')];
    const { slug } = await createArticle(writer(), author.token);
    const reads = {
      profile: async () => (await read(`/api/profiles/${author.username}`, reader.token)).profile.following,
      article: async () => (await read(`/api/articles/${slug}`, reader.token)).article.author.following,
      list: async () => (await read(`/api/articles?author=${author.username}`, reader.token)).articles[0].author.following,
      feed: async () => slugsOf(await read('/api/articles/feed', reader.token)),
      comments: async () => {
        const { comments } = await read(`/api/articles/${slug}/comments`, reader.token);
        return comments.map((comment: { author: { following: boolean } }) => comment.author.following);
      },
    };
    await write('POST', `/api/articles/${slug}/comments`, author.token, { comment: { body: 'by the author' } });

    const followed = await primedThen(reads, () => write('POST', `/api/profiles/${author.username}/follow`, reader.token));
    expect(followed).toEqual({ profile: true, article: true, list: true, feed: [slug], comments: [true] });
    const unfollowed = await primedThen(reads, () => write('DELETE', `/api/profiles/${author.username}/follow`, reader.token));
    expect(unfollowed).toEqual({ profile: false, article: false, list: false, feed: [], comments: [false] });
  });

  it('create, update and delete an article', async () => {
    const [author, follower] = [await registerUser(writer(), 'rywwriter'), await registerUser(writer(), 'rywfollower')];
    await write('POST', `/api/profiles/${author.username}/follow`, follower.token);
    const [tag, newTag] = [unique('ryw'), unique('rywnew')];
    let slug = '';
    const reads = {
      article: async () => (await read(`/api/articles/${slug}`)).article,
      list: async () => slugsOf(await read('/api/articles?limit=5')),
      signedIn: async () => slugsOf(await read('/api/articles?limit=5', follower.token)),
      byTag: async () => slugsOf(await read(`/api/articles?tag=${tag}`)),
      feed: async () => slugsOf(await read('/api/articles/feed', follower.token)),
      tags: async () => {
        const { tags } = (await read('/api/tags')) as { tags: string[] };
        return [tag, newTag].filter((name) => tags.includes(name));
      },
    };

    // No slug to read before the article exists.
    const created = await primedThen({ ...reads, article: async () => null }, async () => {
      slug = (
        await write('POST', '/api/articles', author.token, {
          article: { title: unique('Ryw '), description: 'd', body: 'first', tagList: [tag] },
        })
      ).article.slug;
    });
    expect(created).toMatchObject({ byTag: [slug], feed: [slug], tags: [tag] });
    expect(created.list[0]).toBe(slug);
    expect(created.signedIn[0]).toBe(slug);
    expect((await reads.article()).body).toBe('first');

    const title = unique('Renamed ');
    const updated = await primedThen(
      { ...reads, titles: async () => (await read(`/api/articles?author=${author.username}`)).articles[0].title },
      async () => {
        slug = (await write('PUT', `/api/articles/${slug}`, author.token, { article: { title, body: 'second', tagList: [newTag] } }))
          .article.slug;
      },
    );
    expect(updated).toMatchObject({ article: { title, body: 'second', tagList: [newTag] }, titles: title, byTag: [], tags: [newTag] });

    const deleted = await primedThen({ ...reads, article: async () => (await call(other, 'GET', `/api/articles/${slug}`)).status }, () =>
      write('DELETE', `/api/articles/${slug}`, author.token),
    );
    expect(deleted).toMatchObject({ article: 404, byTag: [], feed: [], tags: [] });
    expect(deleted.list).not.toContain(slug);
    expect(deleted.signedIn).not.toContain(slug);
  });

  it('favorite and unfavorite', async () => {
    const [author, fan] = [await registerUser(writer(), 'rywfav'), await registerUser(writer(), 'rywfan')];
    const { slug } = await createArticle(writer(), author.token);
    const reads = {
      anonymous: async () => (await read(`/api/articles/${slug}`)).article.favoritesCount,
      signedIn: async () => {
        const { article } = await read(`/api/articles/${slug}`, fan.token);
        return [article.favorited, article.favoritesCount];
      },
      list: async () => {
        const [article] = (await read(`/api/articles?author=${author.username}`, fan.token)).articles;
        return [article.favorited, article.favoritesCount];
      },
      favorited: async () => slugsOf(await read(`/api/articles?favorited=${fan.username}`)),
      profile: async () => (await read(`/api/profiles/${fan.username}`)).profile.username,
    };

    const favorited = await primedThen(reads, () => write('POST', `/api/articles/${slug}/favorite`, fan.token));
    expect(favorited).toEqual({ anonymous: 1, signedIn: [true, 1], list: [true, 1], favorited: [slug], profile: fan.username });
    const unfavorited = await primedThen(reads, () => write('DELETE', `/api/articles/${slug}/favorite`, fan.token));
    expect(unfavorited).toEqual({ anonymous: 0, signedIn: [false, 0], list: [false, 0], favorited: [], profile: fan.username });
  });

  it('add and delete a comment', async () => {
    const [author, commenter] = [await registerUser(writer(), 'rywpost'), await registerUser(writer(), 'rywcomment')];
    const { slug } = await createArticle(writer(), author.token);
    const bodies = (token?: string) => async () =>
      (await read(`/api/articles/${slug}/comments`, token)).comments.map((comment: { body: string }) => comment.body);
    const reads = { anonymous: bodies(), signedIn: bodies(author.token) };

    let id = 0;
    const added = await primedThen(reads, async () => {
      id = (await write('POST', `/api/articles/${slug}/comments`, commenter.token, { comment: { body: 'seen at once' } })).comment.id;
    });
    expect(added).toEqual({ anonymous: ['seen at once'], signedIn: ['seen at once'] });
    const deleted = await primedThen(reads, () => write('DELETE', `/api/articles/${slug}/comments/${id}`, commenter.token));
    expect(deleted).toEqual({ anonymous: [], signedIn: [] });
  });
}

describeEachDatabase('read-your-writes across two instances', readYourWrites);
