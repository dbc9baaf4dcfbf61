import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { EVENT_TYPES, type EventType, eventBit, NOTIFIES } from '../src/modules/events/catalogue.js';
import { deferPerTest, describeEachDatabase } from './support/app.js';
import {
  type ApiResponse,
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

describeEachDatabase('events', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;
  const defer = deferPerTest();

  const lastEventId = async () =>
    Number(
      (
        await db()
          .selectFrom('events')
          .select((eb) => eb.fn.max('id').as('id'))
          .executeTakeFirst()
      )?.id ?? 0,
    );

  /** The events written since `afterId`, oldest first, `data` parsed. */
  async function eventsAfter(afterId: number) {
    const rows = await db()
      .selectFrom('events')
      .select(['type', 'actor_id', 'owner_id', 'article_id', 'public', 'data'])
      .where('id', '>', afterId)
      .orderBy('id')
      .execute();
    return rows.map((row) => ({ ...row, data: JSON.parse(row.data) }));
  }

  /** The events `work` wrote, oldest first. */
  async function eventsOf(work: () => Promise<unknown>) {
    const before = await lastEventId();
    await work();
    return eventsAfter(before);
  }

  const profile = (user: TestUser, bio: string | null = null) => ({ username: user.username, bio, image: null, following: false });
  const summary = (article: { slug: string; title: string }) => ({ slug: article.slug, title: article.title });

  it("knows the catalogue's types in the database, with the same bits and notifications as the app", async () => {
    const rows = await db().selectFrom('event_types').select(['name', 'bit', 'notifies']).orderBy('bit').execute();
    expect(rows).toEqual(EVENT_TYPES.map((name) => ({ name, bit: eventBit(name), notifies: NOTIFIES[name] ?? null })));
  });

  it('records a registration and a profile update with the public profile, never the email', async () => {
    let user: TestUser | undefined;
    const registered = await eventsOf(async () => {
      user = await registerUser(app(), 'someone');
    });
    const id = await userIdOf(app(), user!);
    const common = { actor_id: id, owner_id: id, article_id: null, public: 0 };
    expect(registered).toEqual([{ ...common, type: 'user.registered', data: { profile: profile(user!) } }]);

    const newEmail = `${unique('moved')}@example.com`;
    const updated = await eventsOf(() =>
      call(app(), 'PUT', '/api/user', { token: user!.token, body: { user: { bio: 'Hi', email: newEmail } } }),
    );
    expect(updated).toEqual([{ ...common, type: 'user.updated', data: { profile: profile(user!, 'Hi') } }]);
    expect(JSON.stringify([registered, updated])).not.toMatch(/@example\.com/);
  });

  it('records a follow and an unfollow as private events of the followed user', async () => {
    const followed = await registerUser(app(), 'followed');
    const follower = await registerUser(app(), 'follower');
    const common = {
      actor_id: await userIdOf(app(), follower),
      owner_id: await userIdOf(app(), followed),
      article_id: null,
      public: 0,
      data: { profile: profile(followed), follower: profile(follower) },
    };
    expect(await eventsOf(() => setFollowing(app(), follower.token, followed.username))).toEqual([{ ...common, type: 'profile.followed' }]);
    expect(await eventsOf(() => setFollowing(app(), follower.token, followed.username, false))).toEqual([
      { ...common, type: 'profile.unfollowed' },
    ]);
  });

  it("records an article's life: created and updated as anyone sees it, favorites, comments, deletions", async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const authorId = await userIdOf(app(), author);
    const fanId = await userIdOf(app(), fan);
    let article: any;
    const [created] = await eventsOf(async () => {
      article = await createArticle(app(), author.token, { tagList: ['b', 'a'] });
    });
    const byAuthor = { actor_id: authorId, owner_id: authorId, article_id: expect.any(Number) };
    expect(created).toEqual({ ...byAuthor, type: 'article.created', public: 1, data: { article } });
    const articleId = created!.article_id;

    const byFan = { actor_id: fanId, owner_id: authorId, article_id: articleId, public: 0 };
    const favorited = { article: summary(article), profile: profile(fan) };
    expect(await eventsOf(() => setFavorite(app(), fan.token, article.slug))).toEqual([
      { ...byFan, type: 'article.favorited', data: favorited },
    ]);

    // The author sees their own favorite in the answer; the event shows the article as anyone else does.
    await setFavorite(app(), author.token, article.slug);
    let answer: ApiResponse | undefined;
    const [updated] = await eventsOf(async () => {
      answer = await call(app(), 'PUT', `/api/articles/${article.slug}`, { token: author.token, body: { article: { body: 'New body' } } });
    });
    expect(answer!.body.article).toMatchObject({ favorited: true, favoritesCount: 2, body: 'New body' });
    expect(updated).toEqual({
      ...byAuthor,
      type: 'article.updated',
      public: 1,
      data: { article: { ...answer!.body.article, favorited: false } },
    });

    expect(await eventsOf(() => setFavorite(app(), fan.token, article.slug, false))).toEqual([
      { ...byFan, type: 'article.unfavorited', data: favorited },
    ]);

    let comment: any;
    const [commented] = await eventsOf(async () => {
      comment = await addComment(app(), fan.token, article.slug);
    });
    expect(commented).toEqual({ ...byFan, type: 'comment.created', public: 1, data: { article: summary(article), comment } });

    // The article's author may delete anyone's comment on it: the event names who did.
    expect(
      await eventsOf(() => call(app(), 'DELETE', `/api/articles/${article.slug}/comments/${comment.id}`, { token: author.token })),
    ).toEqual([{ ...byAuthor, type: 'comment.deleted', public: 1, data: { article: summary(article), comment: { id: comment.id } } }]);
    expect(await eventsOf(() => call(app(), 'DELETE', `/api/articles/${article.slug}`, { token: author.token }))).toEqual([
      { ...byAuthor, type: 'article.deleted', public: 1, data: { article: summary(article) } },
    ]);
  });

  it('records nothing for a write that changes nothing', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    await setFollowing(app(), fan.token, author.username);
    await setFavorite(app(), fan.token, article.slug);
    const stranger = await registerUser(app(), 'stranger');

    const noOps = await eventsOf(async () => {
      await setFollowing(app(), fan.token, author.username);
      await setFavorite(app(), fan.token, article.slug);
      await setFollowing(app(), stranger.token, author.username, false);
      await setFavorite(app(), stranger.token, article.slug, false);
      expect((await call(app(), 'POST', `/api/profiles/${fan.username}/follow`, { token: fan.token })).status).toBe(422);
    });
    expect(noOps).toEqual([]);
  });

  /**
   * Makes every insert of a `type` event fail, as a full disk or a bug in the fan-out would, after the write's own
   * rows went in. Returns the undo, which also runs after the test whatever happens.
   */
  async function failEvents(type: EventType) {
    const raw = (text: string) => sql.raw(text).execute(db());
    const when = `new.type = '${type}'`;
    const sqlite = ctx().kind === 'sqlite';
    if (sqlite) {
      await raw(`create trigger fail_event before insert on events when ${when} begin select raise(abort, 'injected failure'); end`);
    } else {
      await raw(`create function fail_event() returns trigger language plpgsql as $$ begin raise exception 'injected failure'; end $$`);
      await raw(`create trigger fail_event before insert on events for each row when (${when}) execute function fail_event()`);
    }
    const undo = async () => {
      await raw(sqlite ? 'drop trigger if exists fail_event' : 'drop trigger if exists fail_event on events');
      if (!sqlite) await raw('drop function if exists fail_event()');
    };
    defer(undo);
    return undo;
  }

  /**
   * `write` fails once the event cannot be written, and leaves none of its rows (what `leftBehind` finds), no event
   * and no notification; once events can be written again, the same write goes through.
   */
  async function expectAllOrNothing(type: EventType, write: () => Promise<ApiResponse>, leftBehind: () => Promise<unknown[]>) {
    const undo = await failEvents(type);
    const before = await lastEventId();
    const notices = await db().selectFrom('notifications').select('id').execute();
    expect(await write()).toMatchObject({ status: 500, body: { errors: { server: ['internal error'] } } });
    expect(await leftBehind()).toEqual([]);
    expect(await eventsAfter(before)).toEqual([]);
    expect(await db().selectFrom('notifications').select('id').execute()).toEqual(notices);

    await undo();
    expect((await write()).status).toBeLessThan(300);
    expect((await eventsAfter(before)).map((event) => event.type)).toEqual([type]);
    expect(await leftBehind()).not.toEqual([]);
  }

  it('rolls back a write whose event fails: no article, comment, follow or favorite, no event, no notification', async () => {
    const author = await registerUser(app(), 'author');
    const fan = await registerUser(app(), 'fan');
    const article = await createArticle(app(), author.token);
    const [authorId, fanId] = [await userIdOf(app(), author), await userIdOf(app(), fan)];
    const title = unique('Rolled back ');
    const tag = unique('rolled-back-');

    await expectAllOrNothing(
      'article.created',
      () =>
        call(app(), 'POST', '/api/articles', {
          token: author.token,
          body: { article: { title, description: 'd', body: 'b', tagList: [tag] } },
        }),
      async () => [
        ...(await db().selectFrom('articles').select('id').where('title', '=', title).execute()),
        ...(await db().selectFrom('tags').select('id').where('name', '=', tag).execute()),
      ],
    );
    await expectAllOrNothing(
      'comment.created',
      () => call(app(), 'POST', `/api/articles/${article.slug}/comments`, { token: fan.token, body: { comment: { body: 'lost' } } }),
      () => db().selectFrom('comments').select('id').where('author_id', '=', fanId).execute(),
    );
    await expectAllOrNothing(
      'profile.followed',
      () => call(app(), 'POST', `/api/profiles/${author.username}/follow`, { token: fan.token }),
      () => db().selectFrom('follows').selectAll().where('follower_id', '=', fanId).where('followed_id', '=', authorId).execute(),
    );
    await expectAllOrNothing(
      'article.favorited',
      () => call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: fan.token }),
      () => db().selectFrom('favorites').selectAll().where('user_id', '=', fanId).execute(),
    );
    const { favorites_count } = await db()
      .selectFrom('articles')
      .select('favorites_count')
      .where('slug', '=', article.slug)
      .executeTakeFirstOrThrow();
    expect(favorites_count).toBe(1);
  });

  it('records nothing for a registration refused because the username or email is taken', async () => {
    const taken = await registerUser(app(), 'taken');
    const events = await eventsOf(async () => {
      for (const user of [
        { username: taken.username.toUpperCase(), email: `${unique('other')}@example.com` },
        { username: unique('other'), email: taken.email },
      ]) {
        const response = await call(app(), 'POST', '/api/users', { body: { user: { ...user, password: 'password123' } } });
        expect(response.status, JSON.stringify(response.body)).toBe(409);
      }
    });
    expect(events).toEqual([]);
  });
});
