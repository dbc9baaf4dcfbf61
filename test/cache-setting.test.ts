import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeEachDatabase, type TestContext } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

/**
 * The caches are kept exact by versions that the app's own writes move. A change made by hand in SQL that moves
 * none of them shows which answers came from a cache: with CACHE=off the very next request sees it, with the
 * caches on the answer read before it is still served (until a write moves the version).
 */
function handEditsSeen(ctx: () => TestContext, seen: boolean) {
  /** Reads twice (so that a cache holds the answer), edits by hand, and returns what the next read shows. */
  async function afterHandEdit<T>(read: () => Promise<T>, edit: () => Promise<unknown>): Promise<{ before: T; after: T }> {
    const before = await read();
    expect(await read()).toEqual(before);
    await edit();
    return { before, after: await read() };
  }

  const expectSeen = <T>({ before, after }: { before: T; after: T }, edited: T) => expect(after).toEqual(seen ? edited : before);

  it('an article body, anonymous and signed in', async () => {
    const { app } = ctx();
    const author = await registerUser(app, 'handbody');
    const { slug } = await createArticle(app, author.token, { body: 'as written' });
    for (const token of [undefined, author.token]) {
      const body = unique('by hand ');
      const read = async () => (await call(app, 'GET', `/api/articles/${slug}`, { token })).body.article.body;
      expectSeen(await afterHandEdit(read, () => sql`update articles set body = ${body} where slug = ${slug}`.execute(app.db)), body);
    }
  });

  it('a title in a list, anonymous and signed in', async () => {
    const { app } = ctx();
    const author = await registerUser(app, 'handlist');
    const { slug } = await createArticle(app, author.token);
    for (const token of [undefined, author.token]) {
      const title = unique('By hand ');
      const read = async () => (await call(app, 'GET', `/api/articles?author=${author.username}`, { token })).body.articles[0].title;
      expectSeen(await afterHandEdit(read, () => sql`update articles set title = ${title} where slug = ${slug}`.execute(app.db)), title);
    }
  });

  it('a comment body, anonymous and signed in', async () => {
    const { app } = ctx();
    const author = await registerUser(app, 'handcomment');
    const { slug } = await createArticle(app, author.token);
    const posted = await call(app, 'POST', `/api/articles/${slug}/comments`, {
      token: author.token,
      body: { comment: { body: 'as posted' } },
    });
    expect(posted.status).toBe(201);
    const id: number = posted.body.comment.id;
    for (const token of [undefined, author.token]) {
      const body = unique('by hand ');
      const read = async () => (await call(app, 'GET', `/api/articles/${slug}/comments`, { token })).body.comments[0].body;
      expectSeen(await afterHandEdit(read, () => sql`update comments set body = ${body} where id = ${id}`.execute(app.db)), body);
    }
  });

  it('a tag renamed in the tag list', async () => {
    const { app } = ctx();
    const author = await registerUser(app, 'handtag');
    const [tag, renamed] = [unique('tag'), unique('renamed')];
    await createArticle(app, author.token, { tagList: [tag] });
    const read = async () => {
      const { tags } = (await call(app, 'GET', '/api/tags')).body as { tags: string[] };
      return { tag: tags.includes(tag), renamed: tags.includes(renamed) };
    };
    const edit = () => sql`update tags set name = ${renamed} where name = ${tag}`.execute(app.db);
    expectSeen(await afterHandEdit(read, edit), { tag: false, renamed: true });
  });
}

describeEachDatabase('CACHE=off: a change made by hand in SQL shows on the next request', (ctx) => handEditsSeen(ctx, true), {
  CACHE: 'off',
});

describeEachDatabase('CACHE=on: answers stay cached until a version moves', (ctx) => handEditsSeen(ctx, false));
