import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { addComment, call, createArticle, registerUser, setFavorite, setFollowing, type TestUser, userIdOf } from './support/client.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const cursorOf = (id: number) => Buffer.from(String(id)).toString('base64url');

describeEachDatabase('notifications', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  const list = (token: string | undefined, query = '') => call(app(), 'GET', `/api/notifications${query}`, { token });
  const markRead = (token: string | undefined, body?: unknown) => call(app(), 'POST', '/api/notifications/read', { token, body });

  /** The user's notifications (one page of up to 100), failing unless the answer is 200. */
  async function notificationsOf(user: TestUser) {
    const response = await list(user.token, '?limit=100');
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body;
  }

  const kindsOf = async (user: TestUser) => (await notificationsOf(user)).notifications.map((item: { kind: string }) => item.kind);

  /** Notices written straight into the table: more than requests could make quickly, or of a kind they do not make. */
  const insertNotices = (count: number, notice: { recipient_id: number; actor_id: number; kind: string; endpoint_id?: number }) =>
    db()
      .insertInto('notifications')
      .values(
        Array.from({ length: count }, () => ({
          article_id: null,
          comment_id: null,
          endpoint_id: null,
          event_id: null,
          created_at: Date.now(),
          ...notice,
        })),
      )
      .execute();

  /** A profile as the API shows it before anyone sets a bio or image. */
  const profile = (user: TestUser, following = false) => ({ username: user.username, bio: null, image: null, following });

  it('tells an author about a follow, a favorite and a comment, newest first, with the actor as the author sees them', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    await setFollowing(app(), fan.token, author.username);
    await setFavorite(app(), fan.token, article.slug);
    const comment = await addComment(app(), fan.token, article.slug, 'Nice one');

    const answer = await notificationsOf(author);
    expect(answer).toEqual({ notifications: expect.any(Array), unreadCount: 3, nextCursor: null });
    const [commented, favorited, followed] = answer.notifications;
    const common = { createdAt: expect.stringMatching(ISO_MS), read: false, actor: profile(fan), webhook: null, moderation: null };
    expect(commented).toEqual({
      ...common,
      id: expect.any(Number),
      kind: 'comment',
      article: { slug: article.slug, title: article.title },
      comment: { id: comment.id, body: 'Nice one' },
    });
    expect(favorited).toEqual({
      ...common,
      id: expect.any(Number),
      kind: 'favorite',
      article: { slug: article.slug, title: article.title },
      comment: null,
    });
    expect(followed).toEqual({ ...common, id: expect.any(Number), kind: 'follow', article: null, comment: null });
    expect(commented.id).toBeGreaterThan(favorited.id);
    expect(favorited.id).toBeGreaterThan(followed.id);

    // `following` is the reader's own relation to the actor, read afresh on every list.
    await setFollowing(app(), author.token, fan.username);
    const again = await notificationsOf(author);
    expect(again.notifications.map((item: { actor: unknown }) => item.actor)).toEqual([
      profile(fan, true),
      profile(fan, true),
      profile(fan, true),
    ]);
    expect(await kindsOf(fan)).toEqual(['follow']);
  });

  it('says nothing about what users do to their own articles', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    await setFavorite(app(), author.token, article.slug);
    await addComment(app(), author.token, article.slug);
    expect(await notificationsOf(author)).toEqual({ notifications: [], unreadCount: 0, nextCursor: null });
  });

  it('takes back the notice of a follow or favorite that was undone, and a repeat adds none', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    for (let i = 0; i < 2; i++) {
      await setFollowing(app(), fan.token, author.username);
      await setFavorite(app(), fan.token, article.slug);
    }
    expect(await kindsOf(author)).toEqual(['favorite', 'follow']);

    await setFavorite(app(), fan.token, article.slug, false);
    expect(await kindsOf(author)).toEqual(['follow']);
    await setFollowing(app(), fan.token, author.username, false);
    expect(await notificationsOf(author)).toEqual({ notifications: [], unreadCount: 0, nextCursor: null });
  });

  it('drops the notices about a comment or an article once it is deleted', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    await setFollowing(app(), fan.token, author.username);
    await setFavorite(app(), fan.token, article.slug);
    const kept = await addComment(app(), fan.token, article.slug);
    const deleted = await addComment(app(), fan.token, article.slug);

    expect((await call(app(), 'DELETE', `/api/articles/${article.slug}/comments/${deleted.id}`, { token: fan.token })).status).toBe(204);
    const afterComment = await notificationsOf(author);
    expect(afterComment.notifications.map((item: { kind: string; comment: unknown }) => [item.kind, item.comment])).toEqual([
      ['comment', { id: kept.id, body: kept.body }],
      ['favorite', null],
      ['follow', null],
    ]);

    expect((await call(app(), 'DELETE', `/api/articles/${article.slug}`, { token: author.token })).status).toBe(204);
    expect(await kindsOf(author)).toEqual(['follow']);
  });

  it('pages newest first with a cursor: no notice twice, none skipped, even when new ones arrive meanwhile', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    for (let i = 0; i < 23; i++) await addComment(app(), fan.token, article.slug, `comment ${i}`);
    const all: number[] = (await notificationsOf(author)).notifications.map((item: { id: number }) => item.id);
    expect(all).toHaveLength(23);
    expect(all).toEqual([...all].sort((a, b) => b - a));

    const seen: number[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const response = await list(author.token, `?limit=7${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(response.status).toBe(200);
      seen.push(...response.body.notifications.map((item: { id: number }) => item.id));
      sizes.push(response.body.notifications.length);
      cursor = response.body.nextCursor;
      // Newer than every page already read: it belongs to the first page of a fresh read, not to the next page.
      if (sizes.length === 1) await addComment(app(), fan.token, article.slug, 'late');
    } while (cursor !== null);
    expect(sizes).toEqual([7, 7, 7, 2]);
    expect(seen).toEqual(all);

    // A page that ends exactly at the last notice says there is no next one.
    const exact = await list(author.token, `?limit=24`);
    expect(exact.body.notifications).toHaveLength(24);
    expect(exact.body.nextCursor).toBeNull();
    expect((await list(author.token)).body.notifications).toHaveLength(20);
  });

  it('counts unread notices and moves the read mark forward only', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    for (let i = 0; i < 5; i++) await addComment(app(), fan.token, article.slug);
    const ids: number[] = (await notificationsOf(author)).notifications.map((item: { id: number }) => item.id);
    const readFlags = async () => (await notificationsOf(author)).notifications.map((item: { read: boolean }) => item.read);

    expect(await markRead(author.token, { upTo: ids[2] })).toMatchObject({ status: 200, body: { unreadCount: 2 } });
    expect(await readFlags()).toEqual([false, false, true, true, true]);
    expect((await notificationsOf(author)).unreadCount).toBe(2);

    // An older id leaves the mark where it is.
    expect((await markRead(author.token, { upTo: ids[4] })).body).toEqual({ unreadCount: 2 });
    expect(await readFlags()).toEqual([false, false, true, true, true]);

    // No body at all means no `upTo`, as `{}` does.
    expect((await call(app(), 'POST', '/api/notifications/read', { token: author.token })).body).toEqual({ unreadCount: 0 });
    expect(await readFlags()).toEqual([true, true, true, true, true]);

    // An id beyond the newest notice marks only what is there: what arrives later is still unread.
    expect((await markRead(author.token, { upTo: Number.MAX_SAFE_INTEGER })).body).toEqual({ unreadCount: 0 });
    await addComment(app(), fan.token, article.slug);
    expect((await notificationsOf(author)).unreadCount).toBe(1);
    expect(await readFlags()).toEqual([false, true, true, true, true, true]);
  });

  it('caps the unread count at 1000', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    await insertNotices(1002, { recipient_id: await userIdOf(app(), author), actor_id: await userIdOf(app(), fan), kind: 'follow' });
    expect((await notificationsOf(author)).unreadCount).toBe(1000);
    const ids: number[] = (await notificationsOf(author)).notifications.map((item: { id: number }) => item.id);
    expect((await markRead(author.token, { upTo: ids[98] })).body).toEqual({ unreadCount: 98 });
    expect((await markRead(author.token, {})).body).toEqual({ unreadCount: 0 });
  });

  it('shows which webhook endpoint a notice is about', async () => {
    const owner = await registerUser(app(), 'owner');
    const ownerId = await userIdOf(app(), owner);
    const endpoint = await db()
      .insertInto('webhook_endpoints')
      .values({ owner_id: ownerId, url: 'https://hooks.example.com/conduit', event_mask: 1, secret: 's', created_at: Date.now() })
      .returning('id')
      .executeTakeFirstOrThrow();
    await insertNotices(1, { recipient_id: ownerId, actor_id: ownerId, kind: 'webhook-disabled', endpoint_id: endpoint.id });
    expect((await notificationsOf(owner)).notifications).toEqual([
      expect.objectContaining({
        kind: 'webhook-disabled',
        actor: profile(owner),
        article: null,
        comment: null,
        webhook: { id: endpoint.id, url: 'https://hooks.example.com/conduit' },
      }),
    ]);
  });

  it('refuses a malformed cursor or limit with 422', async () => {
    const user = await registerUser(app(), 'reader');
    // Not base64url, padded, not a number, not canonical, zero, past what a JSON number holds exactly.
    const cursors = [
      '!!!',
      'MQ==',
      cursorOf(0),
      'YWJj',
      Buffer.from('1e3').toString('base64url'),
      Buffer.from('007').toString('base64url'),
    ];
    for (const cursor of [...cursors, cursorOf(2 ** 60), '']) {
      const response = await list(user.token, `?cursor=${encodeURIComponent(cursor)}`);
      expect(response, cursor).toMatchObject({ status: 422, body: { errors: { cursor: ['is invalid'] } } });
    }
    for (const limit of ['0', '101', 'ten']) {
      const response = await list(user.token, `?limit=${limit}`);
      expect(response.status, limit).toBe(422);
      expect(Object.keys(response.body.errors), limit).toEqual(['limit']);
    }
    for (const upTo of [0, -1, 1.5, '7', null]) {
      const response = await markRead(user.token, { upTo });
      expect(response.status, String(upTo)).toBe(422);
      expect(Object.keys(response.body.errors), String(upTo)).toEqual(['upTo']);
    }
  });

  it('answers 401 without a token', async () => {
    for (const response of [await list(undefined), await markRead(undefined)]) {
      expect(response).toMatchObject({ status: 401, body: { errors: { token: ['is missing'] } } });
    }
  });

  it("never shows or marks another user's notifications", async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const stranger = await registerUser(app(), 'stranger');
    const article = await createArticle(app(), author.token);
    await addComment(app(), fan.token, article.slug);
    await addComment(app(), fan.token, article.slug);
    const [newest] = (await notificationsOf(author)).notifications;

    expect(await notificationsOf(stranger)).toEqual({ notifications: [], unreadCount: 0, nextCursor: null });
    // Another user's cursor is only a position: it does not open their list.
    expect((await list(stranger.token, `?cursor=${cursorOf(newest.id)}`)).body.notifications).toEqual([]);
    expect((await markRead(stranger.token, { upTo: newest.id })).body).toEqual({ unreadCount: 0 });
    expect((await notificationsOf(author)).unreadCount).toBe(2);
  });
});
