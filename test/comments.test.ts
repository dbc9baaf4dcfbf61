import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describeEachDatabase('comments', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  const comment = (slug: string, token: string | undefined, body: unknown) =>
    call(app(), 'POST', `/api/articles/${slug}/comments`, { token, body: { comment: { body } } });
  const comments = (slug: string, token?: string) => call(app(), 'GET', `/api/articles/${slug}/comments`, { token });
  const remove = (slug: string, id: number | string, token?: string) =>
    call(app(), 'DELETE', `/api/articles/${slug}/comments/${id}`, { token });

  /** Posts a comment that must succeed and returns it. */
  async function posted(slug: string, token: string, body: string) {
    const response = await comment(slug, token, body);
    expect(response.status).toBe(201);
    return response.body.comment as { id: number; body: string; createdAt: string; updatedAt: string; author: Record<string, unknown> };
  }

  const stillThere = async (id: number) =>
    (await db().selectFrom('comments').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;

  it("creates a comment: 201, integer id, timestamps and the author's profile", async () => {
    const author = await registerUser(app(), 'author');
    const commenter = await registerUser(app(), 'commenter');
    const article = await createArticle(app(), author.token);
    const response = await comment(article.slug, commenter.token, 'Nice article!');
    expect(response.status).toBe(201);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(response.body).toEqual({
      comment: {
        id: expect.any(Number),
        createdAt: expect.stringMatching(ISO_MS),
        updatedAt: expect.stringMatching(ISO_MS),
        body: 'Nice article!',
        author: { username: commenter.username, bio: null, image: null, following: false },
      },
    });
    expect(Number.isInteger(response.body.comment.id)).toBe(true);
    expect(response.body.comment.id).toBeGreaterThan(0);
    expect(response.body.comment.updatedAt).toBe(response.body.comment.createdAt);
    const row = await db().selectFrom('comments').selectAll().where('id', '=', response.body.comment.id).executeTakeFirstOrThrow();
    expect(row.body).toBe('Nice article!');
  });

  it('lists an article without comments as an empty list', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await comments(article.slug);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ comments: [] });
  });

  it('lists comments oldest first, each as it was created', async () => {
    const author = await registerUser(app(), 'author');
    const first = await registerUser(app(), 'first');
    const second = await registerUser(app(), 'second');
    const article = await createArticle(app(), author.token);
    const other = await createArticle(app(), author.token);
    const created = [
      await posted(article.slug, first.token, 'one'),
      await posted(article.slug, second.token, 'two'),
      await posted(other.slug, first.token, 'elsewhere'),
      await posted(article.slug, author.token, 'three'),
      await posted(article.slug, first.token, 'four'),
    ].filter((c) => c.body !== 'elsewhere');
    const response = await comments(article.slug);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ comments: created });
    expect(response.body.comments.map((c: { body: string }) => c.body)).toEqual(['one', 'two', 'three', 'four']);
    const ids = response.body.comments.map((c: { id: number }) => c.id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });

  it('shows following for the viewer on each comment author', async () => {
    const author = await registerUser(app(), 'author');
    const followed = await registerUser(app(), 'followed');
    const unfollowed = await registerUser(app(), 'unfollowed');
    const viewer = await registerUser(app(), 'viewer');
    const article = await createArticle(app(), author.token);
    await posted(article.slug, followed.token, 'by followed');
    await posted(article.slug, unfollowed.token, 'by unfollowed');
    await posted(article.slug, followed.token, 'by followed again');
    expect((await call(app(), 'POST', `/api/profiles/${followed.username}/follow`, { token: viewer.token })).status).toBe(200);

    const asViewer = await comments(article.slug, viewer.token);
    expect(asViewer.status).toBe(200);
    expect(
      asViewer.body.comments.map((c: { author: { username: string; following: boolean } }) => [c.author.username, c.author.following]),
    ).toEqual([
      [followed.username, true],
      [unfollowed.username, false],
      [followed.username, true],
    ]);

    const anonymous = await comments(article.slug);
    for (const c of anonymous.body.comments) expect(c.author.following).toBe(false);
  });

  it('answers 401 for a bad token on the list, never silently anonymous', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await comments(article.slug, 'garbage');
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ errors: { token: ['is invalid'] } });
  });

  it('lets the comment author delete it: 204, empty body, gone from the list', async () => {
    const author = await registerUser(app(), 'author');
    const commenter = await registerUser(app(), 'commenter');
    const article = await createArticle(app(), author.token);
    const kept = await posted(article.slug, commenter.token, 'keep me');
    const doomed = await posted(article.slug, commenter.token, 'delete me');
    const response = await app().inject({
      method: 'DELETE',
      url: `/api/articles/${article.slug}/comments/${doomed.id}`,
      headers: { authorization: `Token ${commenter.token}` },
    });
    expect(response.statusCode).toBe(204);
    expect(response.body).toBe('');
    expect(await stillThere(doomed.id)).toBe(false);
    expect((await comments(article.slug)).body).toEqual({ comments: [kept] });
  });

  it("lets the article author delete someone else's comment on it", async () => {
    const author = await registerUser(app(), 'author');
    const commenter = await registerUser(app(), 'commenter');
    const article = await createArticle(app(), author.token);
    const c = await posted(article.slug, commenter.token, 'rude');
    const response = await remove(article.slug, c.id, author.token);
    expect(response.status).toBe(204);
    expect(response.body).toBeUndefined();
    expect(await stillThere(c.id)).toBe(false);
  });

  it('answers 403 to anyone else and keeps the comment', async () => {
    const author = await registerUser(app(), 'author');
    const commenter = await registerUser(app(), 'commenter');
    const intruder = await registerUser(app(), 'intruder');
    const article = await createArticle(app(), author.token);
    // The intruder's own article does not give rights over comments on another article.
    await createArticle(app(), intruder.token);
    const c = await posted(article.slug, commenter.token, 'mine');
    const response = await remove(article.slug, c.id, intruder.token);
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ errors: { comment: ['forbidden'] } });
    expect(await stillThere(c.id)).toBe(true);
  });

  it('answers 404 for an unknown comment id', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await remove(article.slug, 2_000_000_000, author.token);
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ errors: { comment: ['not found'] } });
  });

  it('answers 404 comment for a comment that exists on another article', async () => {
    const author = await registerUser(app(), 'author');
    const first = await createArticle(app(), author.token);
    const second = await createArticle(app(), author.token);
    const c = await posted(first.slug, author.token, 'on the first');
    const response = await remove(second.slug, c.id, author.token);
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ errors: { comment: ['not found'] } });
    expect(await stillThere(c.id)).toBe(true);
  });

  it('answers 404 comment before 403: an unknown id deleted by a stranger', async () => {
    const author = await registerUser(app(), 'author');
    const stranger = await registerUser(app(), 'stranger');
    const article = await createArticle(app(), author.token);
    const response = await remove(article.slug, 2_000_000_001, stranger.token);
    expect(response.status).toBe(404);
    expect(response.body).toEqual({ errors: { comment: ['not found'] } });
  });

  it('answers 404 for a comment deleted twice', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const c = await posted(article.slug, author.token, 'once');
    expect((await remove(article.slug, c.id, author.token)).status).toBe(204);
    const again = await remove(article.slug, c.id, author.token);
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ errors: { comment: ['not found'] } });
  });

  it('answers 404 article for an unknown article on list, create and delete', async () => {
    const user = await registerUser(app(), 'user');
    const slug = unique('unknown-slug-');
    for (const response of [await comments(slug), await comment(slug, user.token, 'orphan'), await remove(slug, 1, user.token)]) {
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ errors: { article: ['not found'] } });
    }
  });

  it.each([
    ['an empty body', ''],
    ['a blank body', ' \n\t '],
    ['a null body', null],
  ])('answers 422 "can\'t be blank" for %s', async (_name, body) => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await comment(article.slug, author.token, body);
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { body: ["can't be blank"] } });
    expect((await comments(article.slug)).body).toEqual({ comments: [] });
  });

  it('answers 422 for a missing body and for a missing comment wrapper', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const noBody = await call(app(), 'POST', `/api/articles/${article.slug}/comments`, { token: author.token, body: { comment: {} } });
    expect(noBody.status).toBe(422);
    expect(noBody.body).toEqual({ errors: { body: ["can't be blank"] } });
    const noWrapper = await call(app(), 'POST', `/api/articles/${article.slug}/comments`, { token: author.token, body: { body: 'x' } });
    expect(noWrapper.status).toBe(422);
    expect(noWrapper.body).toEqual({ errors: { comment: ["can't be blank"] } });
  });

  it('answers 422 for a body that is not a string', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await comment(article.slug, author.token, 42);
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors)).toEqual(['body']);
  });

  it.each(['abc', '1.5', '0', '-3', '1e3x', 'Infinity', '1e400'])('answers 422 for the comment id %j', async (id) => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const c = await posted(article.slug, author.token, 'still here');
    const response = await remove(article.slug, id, author.token);
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors)).toEqual(['id']);
    expect(await stillThere(c.id)).toBe(true);
  });

  it('answers 422 for a non-numeric id even on an unknown article (422 before 404)', async () => {
    const author = await registerUser(app(), 'author');
    const response = await remove(unique('unknown-slug-'), 'abc', author.token);
    expect(response.status).toBe(422);
    expect(Object.keys(response.body.errors)).toEqual(['id']);
  });

  it('answers 422 for a NUL character in the slug, which PostgreSQL could not look up', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const response = await call(app(), 'GET', `/api/articles/${article.slug}%00/comments`);
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { slug: ['must not contain NUL characters'] } });
  });

  it('answers 401 without a token on create and delete, before anything else', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const c = await posted(article.slug, author.token, 'guarded');
    for (const response of [
      await comment(article.slug, undefined, 'anonymous'),
      await comment(unique('unknown-slug-'), undefined, ''),
      await remove(article.slug, c.id),
      await remove(unique('unknown-slug-'), 'abc'),
    ]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ errors: { token: ['is missing'] } });
    }
    expect(await stillThere(c.id)).toBe(true);
    expect((await comments(article.slug)).body.comments).toHaveLength(1);
  });

  it('answers 422 before 404 for a blank comment on an unknown article', async () => {
    const author = await registerUser(app(), 'author');
    const response = await comment(unique('unknown-slug-'), author.token, '');
    expect(response.status).toBe(422);
    expect(response.body).toEqual({ errors: { body: ["can't be blank"] } });
  });

  it('ignores unknown keys in the comment', async () => {
    const author = await registerUser(app(), 'author');
    const other = await registerUser(app(), 'other');
    const article = await createArticle(app(), author.token);
    const response = await call(app(), 'POST', `/api/articles/${article.slug}/comments`, {
      token: author.token,
      body: { comment: { body: 'real', id: 999_999, author: { username: other.username }, createdAt: '2000-01-01T00:00:00.000Z' } },
    });
    expect(response.status).toBe(201);
    expect(response.body.comment.id).not.toBe(999_999);
    expect(response.body.comment.author.username).toBe(author.username);
    expect(response.body.comment.createdAt).not.toBe('2000-01-01T00:00:00.000Z');
  });
});
