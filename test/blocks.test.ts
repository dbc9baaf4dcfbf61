import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { SCREENS_MAX } from '../src/modules/profiles/blocks.js';
import { deferPerTest, describeEachDatabase } from './support/app.js';
import {
  addComment,
  call,
  createArticle,
  registerUser,
  setFavorite,
  setFollowing,
  type TestUser,
  unique,
  userIdOf,
} from './support/client.js';
import { openStream } from './support/sse.js';

const FORBIDDEN_PROFILE = { errors: { profile: ['forbidden'] } };
const FORBIDDEN_ARTICLE = { errors: { article: ['forbidden'] } };
const ARTICLE_NOT_FOUND = { errors: { article: ['not found'] } };

describeEachDatabase('blocks and mutes', (ctx) => {
  const app = () => ctx().app;
  const defer = deferPerTest();

  const screen = (method: 'POST' | 'DELETE', what: 'block' | 'mute', by: TestUser | undefined, username: string) =>
    call(app(), method, `/api/profiles/${encodeURIComponent(username)}/${what}`, { token: by?.token });
  const block = (by: TestUser, other: TestUser) => screen('POST', 'block', by, other.username);
  const unblock = (by: TestUser, other: TestUser) => screen('DELETE', 'block', by, other.username);
  const mute = (by: TestUser, other: TestUser) => screen('POST', 'mute', by, other.username);
  const unmute = (by: TestUser, other: TestUser) => screen('DELETE', 'mute', by, other.username);
  /** One new user per prefix, in that order. */
  const register = <const P extends readonly string[]>(...prefixes: P) =>
    Promise.all(prefixes.map((prefix) => registerUser(app(), prefix))) as Promise<{ [K in keyof P]: TestUser }>;
  const ok = async (response: Promise<{ status: number; body: any }>) => {
    const answer = await response;
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    return answer.body;
  };

  /** Every article of a list, page after page, with the articlesCount each page gave. */
  async function everyPage(query: string, viewer: TestUser | undefined) {
    const slugs: string[] = [];
    const counts = new Set<number>();
    for (let offset = 0; ; offset += 7) {
      const page = await ok(call(app(), 'GET', `/api/articles${query}${query.includes('?') ? '&' : '?'}limit=7&offset=${offset}`, viewer));
      counts.add(page.articlesCount);
      slugs.push(...page.articles.map((article: { slug: string }) => article.slug));
      if (page.articles.length < 7) break;
    }
    // The total is the number of articles the viewer is shown, whichever page told it.
    expect([...counts], query).toEqual([slugs.length]);
    return slugs;
  }

  const commentAuthors = async (slug: string, viewer: TestUser | undefined) =>
    (await ok(call(app(), 'GET', `/api/articles/${slug}/comments`, viewer))).comments.map(
      (comment: { author: { username: string } }) => comment.author.username,
    );

  const notificationActors = async (user: TestUser) => {
    const answer = await ok(call(app(), 'GET', '/api/notifications?limit=100', user));
    return { actors: answer.notifications.map((item: { actor: { username: string } }) => item.actor.username), unread: answer.unreadCount };
  };

  /**
   * Three authors writing on one tag with one word, a fan who favorites an article of each, a comment by each on the
   * third's article, and the first two following each other: what every read path of the two shows of the other.
   */
  async function scene() {
    const [blocker, blocked, third, fan] = await register('blocker', 'blocked', 'third', 'fan');
    const tag = unique('tag');
    const word = unique('word');
    const write = async (user: TestUser) => [
      await createArticle(app(), user.token, { tagList: [tag], body: `About ${word}` }),
      await createArticle(app(), user.token, { tagList: [tag], body: `More ${word}` }),
    ];
    const articles = { blocker: await write(blocker), blocked: await write(blocked), third: await write(third) };
    for (const own of Object.values(articles)) await setFavorite(app(), fan.token, own[0].slug);
    await setFavorite(app(), blocker.token, articles.third[1].slug);
    for (const user of [blocker, blocked, third]) await addComment(app(), user.token, articles.third[0].slug);
    await setFollowing(app(), blocked.token, blocker.username);
    await setFollowing(app(), blocker.token, blocked.username);
    const slugsOf = (author: keyof typeof articles) => articles[author].map((article) => article.slug);
    return { blocker, blocked, third, fan, tag, word, articles, slugsOf };
  }

  type Scene = Awaited<ReturnType<typeof scene>>;

  /** Every list read `viewer` can make that could show `hidden`'s articles: none of them does. */
  async function expectUnseen(viewer: TestUser, hidden: keyof Scene['articles'], s: Scene) {
    const theirs = s.slugsOf(hidden);
    const lists = [
      '',
      `?tag=${s.tag}`,
      `?author=${s[hidden].username}`,
      `?favorited=${s.fan.username}`,
      `?favorited=${s[hidden].username}`,
      `?tag=${s.tag}&favorited=${s.fan.username}`,
      `?q=${s.word}`,
      `?q=${s.word}&tag=${s.tag}`,
    ];
    for (const query of lists) {
      const shown = await everyPage(query, viewer);
      expect(
        shown.filter((slug) => theirs.includes(slug)),
        query,
      ).toEqual([]);
    }
    expect(await everyPage(`?author=${s[hidden].username}`, viewer)).toEqual([]);
    expect(await everyPage(`?favorited=${s[hidden].username}`, viewer)).toEqual([]);
    const feed = await ok(call(app(), 'GET', '/api/articles/feed?limit=100', viewer));
    expect(feed.articles.filter((article: { slug: string }) => theirs.includes(article.slug))).toEqual([]);
    expect(await commentAuthors(s.articles.third[0].slug, viewer)).not.toContain(s[hidden].username);
  }

  /** What a reader who screens nobody sees of the scene: every article of the three, and every comment. */
  async function expectAllSeenBy(viewer: TestUser | undefined, s: Scene) {
    const all = [...s.slugsOf('blocker'), ...s.slugsOf('blocked'), ...s.slugsOf('third')];
    expect((await everyPage(`?tag=${s.tag}`, viewer)).sort()).toEqual([...all].sort());
    expect((await everyPage(`?q=${s.word}`, viewer)).sort()).toEqual([...all].sort());
    expect((await everyPage(`?favorited=${s.fan.username}`, viewer)).length).toBe(3);
    expect(await commentAuthors(s.articles.third[0].slug, viewer)).toEqual([s.blocker.username, s.blocked.username, s.third.username]);
  }

  it('blocks and mutes idempotently, answering the profile with blocking and muting', async () => {
    const [me, other] = await register('me', 'other');
    const profile = (fields: object) => ({ profile: { username: other.username, bio: null, image: null, following: false, ...fields } });
    for (let twice = 0; twice < 2; twice++) expect(await ok(block(me, other))).toEqual(profile({ blocking: true, muting: false }));
    for (let twice = 0; twice < 2; twice++) expect(await ok(mute(me, other))).toEqual(profile({ blocking: true, muting: true }));
    expect(await ok(call(app(), 'GET', `/api/profiles/${other.username}`, me))).toEqual(profile({ blocking: true, muting: true }));
    for (let twice = 0; twice < 2; twice++) expect(await ok(unblock(me, other))).toEqual(profile({ blocking: false, muting: true }));
    for (let twice = 0; twice < 2; twice++) expect(await ok(unmute(me, other))).toEqual(profile({ blocking: false, muting: false }));
    expect((await call(app(), 'GET', `/api/profiles/${other.username}`)).body).toEqual({
      profile: { username: other.username, bio: null, image: null, following: false },
    });
    // Each counts the two sides of a block and the muter of a mute; all gone again.
    const counts = await app()
      .db.selectFrom('users')
      .select('screened_count')
      .where('username', 'in', [me.username, other.username])
      .execute();
    expect(counts.map((row) => row.screened_count)).toEqual([0, 0]);
  });

  it('refuses oneself (422), an unknown user (404) and a missing token (401)', async () => {
    const me = await registerUser(app(), 'me');
    for (const what of ['block', 'mute'] as const) {
      for (const method of ['POST', 'DELETE'] as const) {
        expect(await screen(method, what, me, me.username)).toMatchObject({
          status: 422,
          body: { errors: { profile: [`cannot ${what} yourself`] } },
        });
        expect(await screen(method, what, me, unique('nobody'))).toMatchObject({
          status: 404,
          body: { errors: { profile: ['not found'] } },
        });
        expect(await screen(method, what, undefined, me.username)).toMatchObject({
          status: 401,
          body: { errors: { token: ['is missing'] } },
        });
      }
    }
  });

  it('ends the follows both ways, takes back their notices, and refuses a follow either way (403) until lifted', async () => {
    const [blocker, blocked] = await register('blocker', 'blocked');
    await setFollowing(app(), blocked.token, blocker.username);
    await setFollowing(app(), blocker.token, blocked.username);
    expect((await notificationActors(blocker)).actors).toEqual([blocked.username]);
    expect(await ok(block(blocker, blocked))).toMatchObject({ profile: { following: false, blocking: true } });
    const rows = await app()
      .db.selectFrom('follows')
      .select('follower_id')
      .where('follower_id', 'in', [await userIdOf(app(), blocker), await userIdOf(app(), blocked)])
      .execute();
    expect(rows).toEqual([]);
    expect(await notificationActors(blocker)).toEqual({ actors: [], unread: 0 });
    expect(await notificationActors(blocked)).toEqual({ actors: [], unread: 0 });
    for (const [from, to] of [
      [blocked, blocker],
      [blocker, blocked],
    ] as const) {
      expect(await call(app(), 'POST', `/api/profiles/${to.username}/follow`, from)).toEqual(
        expect.objectContaining({ status: 403, body: FORBIDDEN_PROFILE }),
      );
    }
    // The blocked still sees the profile, and nothing of the block.
    expect(await ok(call(app(), 'GET', `/api/profiles/${blocker.username}`, blocked))).toEqual({
      profile: { username: blocker.username, bio: null, image: null, following: false, blocking: false, muting: false },
    });
    expect(await notificationActors(blocker)).toEqual({ actors: [], unread: 0 });
    await ok(unblock(blocker, blocked));
    expect(await setFollowing(app(), blocked.token, blocker.username)).toMatchObject({ following: true });
  });

  it('refuses a favorite or a comment across a block, either way (403), and never notifies it', async () => {
    const [blocker, blocked] = await register('blocker', 'blocked');
    const [theirs, mine] = [await createArticle(app(), blocker.token), await createArticle(app(), blocked.token)];
    await ok(block(blocker, blocked));
    for (const [actor, article] of [
      [blocked, theirs],
      [blocker, mine],
    ] as const) {
      for (let twice = 0; twice < 2; twice++) {
        expect(await call(app(), 'POST', `/api/articles/${article.slug}/favorite`, actor)).toMatchObject({
          status: 403,
          body: FORBIDDEN_ARTICLE,
        });
      }
      const comment = await call(app(), 'POST', `/api/articles/${article.slug}/comments`, {
        token: actor.token,
        body: { comment: { body: 'Hi' } },
      });
      expect(comment).toMatchObject({ status: 403, body: FORBIDDEN_ARTICLE });
    }
    const favorites = await app()
      .db.selectFrom('favorites')
      .select('user_id')
      .where('user_id', '=', await userIdOf(app(), blocked))
      .execute();
    expect(favorites).toEqual([]);
    expect(await notificationActors(blocker)).toEqual({ actors: [], unread: 0 });
    expect(await notificationActors(blocked)).toEqual({ actors: [], unread: 0 });
    await ok(unblock(blocker, blocked));
    expect((await setFavorite(app(), blocked.token, theirs.slug)).favorited).toBe(true);
    expect(await addComment(app(), blocked.token, theirs.slug)).toMatchObject({ author: { username: blocked.username } });
  });

  it('shows neither side anything of the other in any list, the feed, search, comments or by link; others see all', async () => {
    const s = await scene();
    // Before the block, the blocked favorited one of the blocker's articles: a notice the blocker stops seeing.
    await setFavorite(app(), s.blocked.token, s.articles.blocker[1].slug);
    expect((await notificationActors(s.blocker)).actors).toContain(s.blocked.username);
    await ok(block(s.blocker, s.blocked));

    await expectUnseen(s.blocked, 'blocker', s);
    await expectUnseen(s.blocker, 'blocked', s);
    for (const [viewer, other] of [
      [s.blocked, 'blocker'],
      [s.blocker, 'blocked'],
    ] as const) {
      const slug = s.slugsOf(other)[0];
      expect(await call(app(), 'GET', `/api/articles/${slug}`, viewer)).toMatchObject({ status: 404, body: ARTICLE_NOT_FOUND });
      expect(await call(app(), 'GET', `/api/articles/${slug}/comments`, viewer)).toMatchObject({ status: 404, body: ARTICLE_NOT_FOUND });
      expect((await notificationActors(viewer)).actors).not.toContain(s[other].username);
    }
    // The unread count leaves the blocked user's notice out as the list does.
    expect(await notificationActors(s.blocker)).toEqual({ actors: [s.fan.username], unread: 1 });
    expect(await ok(call(app(), 'POST', '/api/notifications/read', { token: s.blocker.token, body: {} }))).toEqual({ unreadCount: 0 });

    await expectAllSeenBy(s.third, s);
    await expectAllSeenBy(undefined, s);

    await ok(unblock(s.blocker, s.blocked));
    await expectAllSeenBy(s.blocked, s);
    await expectAllSeenBy(s.blocker, s);
    expect((await notificationActors(s.blocker)).actors).toContain(s.blocked.username);
    expect((await call(app(), 'GET', `/api/articles/${s.slugsOf('blocker')[0]}`, s.blocked)).status).toBe(200);
  });

  it('hides the muted from the muter alone, silently; by link their articles stay readable', async () => {
    const s = await scene();
    const [muter, muted] = [s.blocker, s.blocked];
    await setFavorite(app(), muted.token, s.articles.blocker[1].slug);
    await ok(mute(muter, muted));
    // Unlike a block, a mute ends no follow and refuses nothing.
    expect(await setFollowing(app(), muter.token, muted.username)).toMatchObject({ following: true });
    await addComment(app(), muted.token, s.articles.blocker[0].slug);

    await expectUnseen(muter, 'blocked', s);
    expect((await ok(call(app(), 'GET', '/api/articles/feed?limit=100', muter))).articlesCount).toBe(0);
    expect(await commentAuthors(s.articles.blocker[0].slug, muter)).toEqual([]);
    expect((await notificationActors(muter)).actors).not.toContain(muted.username);
    expect((await call(app(), 'GET', `/api/articles/${s.slugsOf('blocked')[0]}`, muter)).status).toBe(200);
    // The muted and everyone else see everything, and nothing says the mute is there.
    await expectAllSeenBy(muted, s);
    await expectAllSeenBy(s.third, s);
    expect(await ok(call(app(), 'GET', `/api/profiles/${muter.username}`, muted))).toMatchObject({
      profile: { following: true, muting: false },
    });
    expect(await commentAuthors(s.articles.blocker[0].slug, muted)).toEqual([muted.username]);

    await ok(unmute(muter, muted));
    await expectAllSeenBy(muter, s);
    expect((await ok(call(app(), 'GET', '/api/articles/feed?limit=100', muter))).articlesCount).toBe(2);
    expect((await notificationActors(muter)).actors).toContain(muted.username);
  });

  it('keeps the feed and its count to the followed authors the viewer does not mute', async () => {
    const [reader, loud, quiet] = await register('reader', 'loud', 'quiet');
    for (const author of [loud, quiet, loud]) await createArticle(app(), author.token);
    for (const author of [loud, quiet]) await setFollowing(app(), reader.token, author.username);
    await ok(mute(reader, loud));
    const feed = await ok(call(app(), 'GET', '/api/articles/feed', reader));
    expect(feed.articles.map((article: { author: { username: string } }) => article.author.username)).toEqual([quiet.username]);
    expect(feed.articlesCount).toBe(1);
  });

  it('keeps a signed-in event stream free of what a screened account does', async () => {
    await app().listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app().server.address() as AddressInfo).port}`;
    const [blocker, blocked, third] = await register('blocker', 'blocked', 'third');
    const shared = await createArticle(app(), third.token);
    await ok(block(blocker, blocked));
    const stream = await openStream(`${base}/api/events`, { authorization: `Token ${blocked.token}` });
    defer(async () => stream.close());
    await stream.until((messages) => messages.length > 0);

    const hidden = await createArticle(app(), blocker.token);
    await addComment(app(), blocker.token, shared.slug);
    const shown = await createArticle(app(), third.token);
    await stream.until(() => stream.events().some((event) => event.envelope.data.article?.slug === shown.slug));
    // On PostgreSQL a new stream may also carry what committed just before it opened: the shared article among them.
    const fromBlocker = stream
      .events()
      .filter(
        (event) => event.envelope.data.article?.slug === hidden.slug || event.envelope.data.comment?.author.username === blocker.username,
      );
    expect(fromBlocker).toEqual([]);
  });

  describe('the cap', () => {
    let filler: string[] = [];
    beforeAll(async () => {
      // SCREENS_MAX accounts to mute, written in one statement: through the API they would take minutes.
      const prefix = unique('cap');
      const name = sql<string>`cast(${prefix} as text) || i`;
      await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${SCREENS_MAX})
        insert into users (username, username_key, email, email_key, password_hash, created_at, updated_at)
        select ${name}, ${name}, ${name} || '@example.com', ${name} || '@example.com', 'x', 0, 0 from n`.execute(app().db);
      const rows = await app().db.selectFrom('users').select('username').where('username', 'like', `${prefix}%`).execute();
      filler = rows.map((row) => row.username);
    });

    it(`refuses a block or mute past ${SCREENS_MAX} of them (422); a repeat at the cap is still answered`, async () => {
      const [me, other] = await register('me', 'other');
      const myId = await userIdOf(app(), me);
      await app()
        .db.transaction()
        .execute(async (trx) => {
          // PostgreSQL would move the muter's screened_count once per row, each move walking the row's versions so far:
          // minutes for ten thousand. The count is set once instead, as the triggers would leave it.
          if (ctx().kind === 'postgres') await sql`set local session_replication_role = replica`.execute(trx);
          await trx
            .insertInto('mutes')
            .columns(['muter_id', 'muted_id', 'created_at'])
            .expression((eb) =>
              eb
                .selectFrom('users')
                .select([
                  eb.cast<number>(eb.val(myId), 'integer').as('muter_id'),
                  'users.id',
                  eb.cast<number>(eb.val(0), 'bigint').as('created_at'),
                ])
                .where('users.username', 'in', filler),
            )
            .execute();
          if (ctx().kind === 'postgres')
            await trx.updateTable('users').set({ screened_count: SCREENS_MAX }).where('id', '=', myId).execute();
        });
      for (const what of ['block', 'mute'] as const) {
        expect(await screen('POST', what, me, other.username)).toMatchObject({
          status: 422,
          body: { errors: { profile: ['too many blocks and mutes'] } },
        });
      }
      expect(await ok(call(app(), 'GET', `/api/profiles/${other.username}`, me))).toMatchObject({
        profile: { blocking: false, muting: false },
      });
      expect(await ok(screen('POST', 'mute', me, filler[0]!))).toMatchObject({ profile: { muting: true } });
      await ok(screen('DELETE', 'mute', me, filler[0]!));
      expect(await ok(block(me, other))).toMatchObject({ profile: { blocking: true } });
    });
  });
});
