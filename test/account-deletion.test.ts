import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import type { Executor } from '../src/db/index.js';
import { publishDueArticles } from '../src/modules/articles/scheduler.js';
import { purgeDueAccounts } from '../src/modules/users/purge.js';
import { type DatabaseKind, describeEachDatabase } from './support/app.js';
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
import { derivedDataMismatches, NO_MISMATCHES } from './support/invariants.js';
import { childEnv, runNode } from './support/processes.js';

const DAY_MS = 86_400_000;

const login = (app: FastifyInstance, user: Pick<TestUser, 'email' | 'password'>) =>
  call(app, 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });

const leave = (app: FastifyInstance, token: string, password: unknown) =>
  call(app, 'DELETE', '/api/user', { token, body: { user: { password } } });

/**
 * An account about to leave, with everything it can hold and do to others: articles (one with a tag of its own, one
 * sharing a tag), a bio, follows both ways, favorites both ways, comments both ways, an Idempotency-Key record, and the
 * notifications all that made. `other` favorited, followed and commented on it; `third` favorited other's article too.
 */
async function leaverWithHistory(app: FastifyInstance) {
  const username = unique('leaver');
  const registered = { username, email: `${username}@example.com`, password: 'password123' };
  // With a key, so that the record register keeps for a replay is there too.
  const response = await call(app, 'POST', '/api/users', { body: { user: registered }, headers: { 'idempotency-key': unique('k') } });
  expect(response.status).toBe(201);
  const leaver: TestUser = { ...registered, token: response.body.user.token };
  const other = await registerUser(app, 'other');
  const third = await registerUser(app, 'third');
  const ownTag = unique('own');
  const sharedTag = unique('shared');
  const word = unique('zq');
  const bio = unique('Bio of the leaver ');
  expect((await call(app, 'PUT', '/api/user', { token: leaver.token, body: { user: { bio } } })).status).toBe(200);
  const created = await call(app, 'POST', '/api/articles', {
    token: leaver.token,
    headers: { 'idempotency-key': unique('k') },
    body: { article: { title: `Leaving ${word}`, description: 'About leaving', body: 'The body', tagList: [ownTag, sharedTag] } },
  });
  expect(created.status).toBe(201);
  const article = created.body.article;
  const second = await createArticle(app, leaver.token, { title: unique('Second of the leaver '), tagList: [sharedTag] });
  const othersArticle = await createArticle(app, other.token, { tagList: [sharedTag] });
  await setFollowing(app, other.token, leaver.username);
  await setFollowing(app, leaver.token, other.username);
  await setFavorite(app, other.token, article.slug);
  await setFavorite(app, leaver.token, othersArticle.slug);
  await setFavorite(app, third.token, othersArticle.slug);
  const leaversComment = await addComment(app, leaver.token, othersArticle.slug, unique('Said by the leaver '));
  const othersComment = await addComment(app, other.token, article.slug);
  return { leaver, other, third, ownTag, sharedTag, word, bio, article, second, othersArticle, leaversComment, othersComment };
}

type World = Awaited<ReturnType<typeof leaverWithHistory>>;

/** What everyone but the leaver can see that the leaving account touches. */
async function seenByOthers(app: FastifyInstance, w: World) {
  const get = async (url: string, token?: string) => {
    const { status, body } = await call(app, 'GET', url, { token });
    return { status, body };
  };
  return {
    profile: await get(`/api/profiles/${w.leaver.username}`, w.other.token),
    anonymousProfile: await get(`/api/profiles/${w.leaver.username}`),
    article: await get(`/api/articles/${w.article.slug}`, w.other.token),
    comments: await get(`/api/articles/${w.article.slug}/comments`),
    othersComments: await get(`/api/articles/${w.othersArticle.slug}/comments`, w.third.token),
    othersArticle: await get(`/api/articles/${w.othersArticle.slug}`),
    list: await get('/api/articles?limit=100'),
    byAuthor: await get(`/api/articles?author=${w.leaver.username}`),
    favorited: await get(`/api/articles?favorited=${w.leaver.username}`),
    ownTag: await get(`/api/articles?tag=${w.ownTag}`),
    sharedTag: await get(`/api/articles?tag=${w.sharedTag}`),
    tags: await get('/api/tags'),
    search: await get(`/api/articles?q=${w.word}`),
    feed: await get('/api/articles/feed', w.other.token),
    notifications: await get('/api/notifications', w.other.token),
    authorFeed: (await call(app, 'GET', `/feeds/authors/${w.leaver.username}/articles.json`)).status,
  };
}

const eventsOf = (db: Executor, type: string, ownerId: number) =>
  db.selectFrom('events').select(['actor_id', 'public', 'data']).where('type', '=', type).where('owner_id', '=', ownerId).execute();

describeEachDatabase('leaving: request, grace and cancellation', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  it('checks the password: 401 when wrong, 422 when missing, 401 without a token; nothing changes', async () => {
    const user = await registerUser(app(), 'careful');
    expect(await leave(app(), user.token, 'not-the-password')).toMatchObject({
      status: 401,
      body: { errors: { credentials: ['invalid'] } },
    });
    const missing = await call(app(), 'DELETE', '/api/user', { token: user.token, body: { user: {} } });
    expect(missing.status).toBe(422);
    expect(missing.body.errors.password).toBeDefined();
    expect((await call(app(), 'DELETE', '/api/user', { token: user.token, body: {} })).status).toBe(422);
    expect((await leave(app(), user.token, '   ')).status).toBe(422);
    expect((await leave(app(), '', user.password)).status).toBe(401);
    expect((await call(app(), 'GET', `/api/profiles/${user.username}`)).status).toBe(200);
    expect((await call(app(), 'GET', '/api/user/deletion', { token: user.token })).status).toBe(404);
  });

  it('hides the account from everyone else, revokes every other session, and cancelling puts back exactly what was', async () => {
    const w = await leaverWithHistory(app());
    const leaverId = await userIdOf(app(), w.leaver);
    const before = await seenByOthers(app(), w);
    expect(before.profile.status).toBe(200);
    expect(before.tags.body.tags).toContain(w.ownTag);
    expect(before.search.body.articlesCount).toBe(1);
    expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);
    const otherSession = (await login(app(), w.leaver)).body.user.token as string;

    const started = Date.now();
    const requested = await leave(app(), w.leaver.token, w.leaver.password);
    expect(requested.status).toBe(202);
    const { purgeAt } = requested.body.deletion;
    expect(requested.body).toEqual({ deletion: { purgeAt: expect.any(String) } });
    expect(Date.parse(purgeAt) - started).toBeGreaterThanOrEqual(30 * DAY_MS);
    expect(Date.parse(purgeAt) - Date.now()).toBeLessThanOrEqual(30 * DAY_MS);

    // Everyone else: the account, its articles and its comments are gone; counts and tags drop.
    const during = await seenByOthers(app(), w);
    expect(during.profile).toEqual({ status: 404, body: { errors: { profile: ['not found'] } } });
    expect(during.anonymousProfile.status).toBe(404);
    expect(during.article).toEqual({ status: 404, body: { errors: { article: ['not found'] } } });
    expect(during.comments.status).toBe(404);
    expect(during.othersComments.body.comments.map((c: { id: number }) => c.id)).not.toContain(w.leaversComment.id);
    expect(during.othersComments.body.comments).toHaveLength(before.othersComments.body.comments.length - 1);
    expect(during.list.body.articlesCount).toBe(before.list.body.articlesCount - 2);
    const slugs = (answer: { body: { articles: { slug: string }[] } }) => answer.body.articles.map((a) => a.slug);
    expect(slugs(during.list)).not.toContain(w.article.slug);
    expect(during.byAuthor.body).toMatchObject({ articles: [], articlesCount: 0 });
    expect(during.favorited.body).toMatchObject({ articles: [], articlesCount: 0 });
    expect(during.ownTag.body).toMatchObject({ articles: [], articlesCount: 0 });
    expect(during.sharedTag.body.articlesCount).toBe(before.sharedTag.body.articlesCount - 2);
    expect(during.tags.body.tags).not.toContain(w.ownTag);
    expect(during.search.body).toMatchObject({ articles: [], articlesCount: 0 });
    expect(slugs(during.feed)).not.toContain(w.article.slug);
    const actors = (answer: { body: { notifications: { actor: { username: string } }[] } }) =>
      answer.body.notifications.map((n) => n.actor.username);
    expect(actors(before.notifications)).toContain(w.leaver.username);
    expect(actors(during.notifications)).not.toContain(w.leaver.username);
    const fromLeaver = actors(before.notifications).filter((name) => name === w.leaver.username).length;
    expect(fromLeaver).toBe(3);
    expect(during.notifications.body.unreadCount).toBe(before.notifications.body.unreadCount - fromLeaver);
    expect(during.authorFeed).toBe(404);
    for (const method of ['POST', 'DELETE'] as const) {
      expect((await call(app(), method, `/api/profiles/${w.leaver.username}/follow`, { token: w.third.token })).status).toBe(404);
    }
    expect((await call(app(), 'POST', `/api/articles/${w.article.slug}/favorite`, { token: w.third.token })).status).toBe(404);
    expect((await call(app(), 'GET', `/api/events?author=${w.leaver.username}`)).status).toBe(404);
    // Other articles keep their true counts: the leaver's favorite still counts on the article it favorited.
    expect(during.othersArticle.body.article.favoritesCount).toBe(2);
    expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);

    // The leaver: still itself, signed in on this session only, and writing nothing but the cancellation.
    expect((await call(app(), 'GET', '/api/user', { token: otherSession })).body).toEqual({ errors: { token: ['is invalid'] } });
    expect((await call(app(), 'GET', '/api/user', { token: w.leaver.token })).status).toBe(200);
    expect((await call(app(), 'GET', `/api/profiles/${w.leaver.username}`, { token: w.leaver.token })).status).toBe(200);
    expect((await call(app(), 'GET', `/api/articles/${w.article.slug}`, { token: w.leaver.token })).status).toBe(200);
    const own = await call(app(), 'GET', '/api/user/articles', { token: w.leaver.token });
    expect(own.body.articlesCount).toBe(2);
    const ownComments = await call(app(), 'GET', `/api/articles/${w.othersArticle.slug}/comments`, { token: w.leaver.token });
    expect(ownComments.body.comments.map((c: { id: number }) => c.id)).toContain(w.leaversComment.id);
    expect(await call(app(), 'GET', '/api/user/deletion', { token: w.leaver.token })).toMatchObject({
      status: 200,
      body: { deletion: { purgeAt } },
    });
    const refused = { status: 403, body: { errors: { account: ['is being deleted'] } } };
    expect(
      await call(app(), 'POST', '/api/articles', {
        token: w.leaver.token,
        body: { article: { title: 'x', description: 'x', body: 'x' } },
      }),
    ).toMatchObject(refused);
    expect(await call(app(), 'PUT', '/api/user', { token: w.leaver.token, body: { user: { bio: 'x' } } })).toMatchObject(refused);
    expect(await addCommentStatus(app(), w.leaver.token, w.othersArticle.slug)).toBe(403);
    // Validation still comes first.
    expect((await call(app(), 'POST', '/api/articles', { token: w.leaver.token, body: {} })).status).toBe(422);

    // Asked again: the same deletion, nothing more recorded.
    const again = await leave(app(), w.leaver.token, w.leaver.password);
    expect(again).toMatchObject({ status: 202, body: { deletion: { purgeAt } } });
    expect(await leave(app(), w.leaver.token, 'wrong-password')).toMatchObject({ status: 401 });
    const requestedEvents = await eventsOf(db(), 'user.deletion_requested', leaverId);
    expect(requestedEvents).toHaveLength(1);
    expect(requestedEvents[0]!.public).toBe(0);
    expect(JSON.parse(requestedEvents[0]!.data)).toEqual({
      user: { id: leaverId },
      profile: { username: w.leaver.username, bio: w.bio, image: null, following: false },
      purgeAt,
    });

    // Signing in still works, so the owner can come back.
    const signedIn = await login(app(), w.leaver);
    expect(signedIn.status).toBe(200);
    expect((await call(app(), 'GET', '/api/user', { token: signedIn.body.user.token })).status).toBe(200);

    const cancelled = await call(app(), 'DELETE', '/api/user/deletion', { token: signedIn.body.user.token });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual({
      user: {
        email: w.leaver.email,
        token: signedIn.body.user.token,
        username: w.leaver.username,
        bio: w.bio,
        image: null,
        role: 'user',
      },
    });
    expect(await seenByOthers(app(), w)).toEqual(before);
    expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);
    expect((await call(app(), 'GET', '/api/user', { token: otherSession })).status).toBe(401);
    expect((await call(app(), 'GET', '/api/user/deletion', { token: w.leaver.token })).body).toEqual({
      errors: { deletion: ['not found'] },
    });
    expect((await call(app(), 'PUT', '/api/user', { token: w.leaver.token, body: { user: { bio: w.bio } } })).status).toBe(200);
    // Cancelling what is not pending answers the same and records nothing.
    expect((await call(app(), 'DELETE', '/api/user/deletion', { token: w.leaver.token })).status).toBe(200);
    const cancelledEvents = await eventsOf(db(), 'user.deletion_cancelled', leaverId);
    expect(cancelledEvents.map((event) => ({ ...event, data: JSON.parse(event.data) }))).toEqual([
      {
        actor_id: leaverId,
        public: 0,
        data: { user: { id: leaverId }, profile: { username: w.leaver.username, bio: w.bio, image: null, following: false } },
      },
    ]);
  });

  it('publishes a scheduled article of a leaving account on time, for its author alone, and off the public stream', async () => {
    const author = await registerUser(app(), 'scheduler');
    // Far enough ahead for the deletion to come first on a busy machine (the app's own scheduler runs too).
    const publishAt = new Date(Date.now() + 1500).toISOString();
    const created = await call(app(), 'POST', '/api/articles', {
      token: author.token,
      body: { article: { title: unique('Soon '), description: 'd', body: 'b', status: 'scheduled', publishAt } },
    });
    expect(created.status).toBe(201);
    expect((await leave(app(), author.token, author.password)).status).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, Date.parse(publishAt) - Date.now() + 50));
    await publishDueArticles(db());
    const { slug } = created.body.article;
    expect((await call(app(), 'GET', `/api/articles/${slug}`)).status).toBe(404);
    expect((await call(app(), 'GET', `/api/articles/${slug}`, { token: author.token })).body.article.status).toBe('published');
    const published = await eventsOf(db(), 'article.published', await userIdOf(app(), author));
    expect(published.map((event) => event.public)).toEqual([0]);
    expect(JSON.parse(published[0]!.data).article.slug).toBe(slug);

    expect((await call(app(), 'DELETE', '/api/user/deletion', { token: author.token })).status).toBe(200);
    expect((await call(app(), 'GET', `/api/articles/${slug}`)).body.article.publishedAt).toBe(publishAt);
    expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);
  });

  it('treats an account whose purge time has come as gone, before any pass has purged it', async () => {
    const user = await registerUser(app(), 'due');
    const id = await userIdOf(app(), user);
    expect((await leave(app(), user.token, user.password)).status).toBe(202);
    // The clock moved past the grace: the row says so.
    await db()
      .updateTable('users')
      .set({ purge_at: Date.now() - 1 })
      .where('id', '=', id)
      .execute();
    expect((await call(app(), 'GET', '/api/user', { token: user.token })).body).toEqual({ errors: { token: ['is invalid'] } });
    expect((await call(app(), 'DELETE', '/api/user/deletion', { token: user.token })).status).toBe(401);
    expect((await login(app(), user)).body).toEqual({ errors: { credentials: ['invalid'] } });
    expect((await call(app(), 'GET', `/api/profiles/${user.username}`)).status).toBe(404);
    // Still taken until the purge reserves it.
    expect((await call(app(), 'POST', '/api/users', { body: { user: { ...user, email: `${unique('x')}@example.com` } } })).status).toBe(
      409,
    );
    expect(await purgeDueAccounts(db(), Date.now())).toBe(1);
    expect(await db().selectFrom('users').select('id').where('id', '=', id).executeTakeFirst()).toBeUndefined();
  });
});

const addCommentStatus = async (app: FastifyInstance, token: string, slug: string) =>
  (await call(app, 'POST', `/api/articles/${slug}/comments`, { token, body: { comment: { body: 'x' } } })).status;

/** Every text a table holds that contains one of `needles` (case-insensitive), as `table.column`, on either database. */
async function mentions(db: Executor, kind: DatabaseKind, needles: string[]): Promise<string[]> {
  const columns =
    kind === 'sqlite'
      ? (
          await sql<{ table_name: string; column_name: string }>`
            select m.name as table_name, p.name as column_name
            from sqlite_master m join pragma_table_info(m.name) p where m.type = 'table'`.execute(db)
        ).rows
      : (
          await sql<{ table_name: string; column_name: string }>`
            select table_name, column_name from information_schema.columns where table_schema = current_schema()`.execute(db)
        ).rows;
  const found: string[] = [];
  for (const { table_name: table, column_name: column } of columns) {
    const text = sql`lower(cast(${sql.ref(column)} as text))`;
    const matching = sql.join(
      needles.map((needle) => sql`${text} like ${`%${needle.toLowerCase()}%`}`),
      sql` or `,
    );
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)} where ${matching}`.execute(db);
    if (Number(rows[0]!.n) > 0) found.push(`${table}.${column}`);
  }
  return found;
}

describeEachDatabase(
  'leaving: the purge',
  (ctx) => {
    const app = () => ctx().app;
    const db = () => ctx().app.db;

    it('with no grace purges at once every row that names or holds the account, keeps other counts true, and reserves the name and email', async () => {
      const w = await leaverWithHistory(app());
      const leaverId = await userIdOf(app(), w.leaver);
      const otherId = await userIdOf(app(), w.other);
      const webhook = (token: string, url: string, events: string[]) =>
        call(app(), 'POST', '/api/webhooks', { token, body: { webhook: { url, events } } });
      expect((await webhook(w.leaver.token, `https://hooks.example.com/${w.leaver.username}`, ['article.favorited'])).status).toBe(201);
      expect((await webhook(w.other.token, 'https://hooks.example.com/other', ['article.favorited', 'profile.followed'])).status).toBe(201);
      // Done to `other` by the leaver after other's endpoint exists: deliveries that outlive the leaver.
      await setFavorite(app(), w.leaver.token, w.othersArticle.slug, false);
      await setFavorite(app(), w.leaver.token, w.othersArticle.slug);
      const needles = [w.leaver.username, w.leaver.email, w.article.title, w.second.title, w.bio, w.leaversComment.body, w.word];
      expect(await mentions(db(), ctx().kind, needles)).not.toEqual([]);

      const started = Date.now();
      const purged = await leave(app(), w.leaver.token, w.leaver.password);
      expect(purged.status).toBe(202);
      expect(Date.parse(purged.body.deletion.purgeAt)).toBeGreaterThanOrEqual(started);
      expect(Date.parse(purged.body.deletion.purgeAt)).toBeLessThanOrEqual(Date.now());

      expect(await mentions(db(), ctx().kind, needles)).toEqual([]);
      for (const [table, column] of [
        ['users', 'id'],
        ['articles', 'author_id'],
        ['comments', 'author_id'],
        ['favorites', 'user_id'],
        ['follows', 'follower_id'],
        ['follows', 'followed_id'],
        ['notifications', 'recipient_id'],
        ['notifications', 'actor_id'],
        ['notification_marks', 'user_id'],
        ['webhook_endpoints', 'owner_id'],
      ] as const) {
        const { rows } = await sql<{
          n: number | string;
        }>`select count(*) as n from ${sql.table(table)} where ${sql.ref(column)} = ${leaverId}`.execute(db());
        expect({ table, column, n: Number(rows[0]!.n) }).toEqual({ table, column, n: 0 });
      }
      expect(await db().selectFrom('idempotency_keys').select('scope').where('scope', '=', `user:${leaverId}`).execute()).toEqual([]);
      // The search index holds nothing of the articles: neither through the API nor in the index itself.
      expect((await call(app(), 'GET', `/api/articles?q=${w.word}`)).body).toMatchObject({ articles: [], articlesCount: 0 });
      const indexed =
        ctx().kind === 'sqlite'
          ? sql<{ n: number }>`select count(*) as n from article_search where article_search match ${`"${w.word}"`}`
          : sql<{ n: number }>`select count(*) as n from article_search where document @@ to_tsquery('simple', ${w.word.toLowerCase()})`;
      expect(Number((await indexed.execute(db())).rows[0]!.n)).toBe(0);

      // What the leaver did to others stays in their delivery log, redacted; what was about the leaver is gone.
      const events = await db().selectFrom('events').select(['type', 'actor_id', 'owner_id', 'data']).execute();
      expect(events.filter((event) => event.owner_id === leaverId)).toEqual([
        { type: 'user.deleted', actor_id: leaverId, owner_id: leaverId, data: JSON.stringify({ user: { id: leaverId } }) },
      ]);
      expect(events.filter((event) => event.actor_id === leaverId && event.owner_id !== leaverId)).toEqual([]);
      const delivered = await db()
        .selectFrom('webhook_deliveries')
        .innerJoin('webhook_endpoints', 'webhook_endpoints.id', 'webhook_deliveries.endpoint_id')
        .innerJoin('events', 'events.id', 'webhook_deliveries.event_id')
        .select(['events.type', 'events.actor_id', 'events.data'])
        .where('webhook_endpoints.owner_id', '=', otherId)
        .execute();
      expect(delivered.filter((row) => row.actor_id === null)).toEqual([
        { type: 'article.favorited', actor_id: null, data: '{"redacted":true}' },
      ]);

      // Counts of what stays are true: the leaver's favorite left the article it favorited.
      const othersArticle = await call(app(), 'GET', `/api/articles/${w.othersArticle.slug}`);
      expect(othersArticle.body.article.favoritesCount).toBe(1);
      expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);

      // Gone for the leaver too.
      expect((await call(app(), 'GET', '/api/user', { token: w.leaver.token })).status).toBe(401);
      expect((await login(app(), w.leaver)).status).toBe(401);

      // Nobody takes the name or the address for 30 days: not as typed, not in another case, not as a lookalike.
      const register = (user: { username: string; email: string }) =>
        call(app(), 'POST', '/api/users', { body: { user: { ...user, password: 'password123' } } });
      const fresh = () => `${unique('fresh')}@example.com`;
      expect(await register({ username: w.leaver.username, email: fresh() })).toMatchObject({
        status: 409,
        body: { errors: { username: ['has already been taken'] } },
      });
      expect((await register({ username: w.leaver.username.toUpperCase(), email: fresh() })).status).toBe(409);
      expect(await register({ username: unique('fresh'), email: w.leaver.email.toUpperCase() })).toMatchObject({
        status: 409,
        body: { errors: { email: ['has already been taken'] } },
      });
      expect(await register({ username: w.leaver.username, email: w.leaver.email })).toMatchObject({
        status: 409,
        body: { errors: { username: ['has already been taken'], email: ['has already been taken'] } },
      });
      // "l" and "I" look alike (identity.ts).
      const lookalike = w.leaver.username.replace(/^l/, 'I');
      expect(await register({ username: lookalike, email: fresh() })).toMatchObject({
        status: 409,
        body: { errors: { username: ['looks too much like an existing username'] } },
      });
      expect(await call(app(), 'PUT', '/api/user', { token: w.third.token, body: { user: { email: w.leaver.email } } })).toMatchObject({
        status: 409,
        body: { errors: { email: ['has already been taken'] } },
      });
      expect((await register({ username: unique('fresh'), email: fresh() })).status).toBe(201);

      // 30 days on (the reservations' end moved back instead of the clock forward): free again.
      const reserved = await db().selectFrom('reserved_identities').select('until').execute();
      expect(reserved.length).toBeGreaterThanOrEqual(3);
      expect(Math.max(...reserved.map((row) => Number(row.until))) - started).toBeGreaterThanOrEqual(30 * DAY_MS);
      await db()
        .updateTable('reserved_identities')
        .set({ until: Date.now() - 1 })
        .execute();
      expect((await register({ username: w.leaver.username, email: w.leaver.email })).status).toBe(201);
    });
  },
  { ACCOUNT_DELETION_GRACE: '0', WEBHOOKS_DELIVERY: 'off' },
);

const PURGE_PASS = path.join(import.meta.dirname, 'support', 'purge-pass.ts');

describeEachDatabase('leaving: the purge pass in several processes', (ctx) => {
  it('purges each due account exactly once when two processes on one database run the pass at the same moment', {
    timeout: 60_000,
  }, async () => {
    const app = ctx().app;
    const leavers = await Promise.all([1, 2, 3].map(() => registerUser(app, 'many')));
    const ids = await Promise.all(leavers.map((leaver) => userIdOf(app, leaver)));
    for (const leaver of leavers) await createArticle(app, leaver.token, { tagList: [unique('t')] });
    for (const leaver of leavers) expect((await leave(app, leaver.token, leaver.password)).status).toBe(202);
    // Not due yet: nothing happens.
    expect(await purgeDueAccounts(app.db, Date.now())).toBe(0);

    // Both wait for the same moment, time enough for each to start.
    const later = Date.now() + 31 * DAY_MS;
    const startAt = Date.now() + 5000;
    const env = { ...childEnv(ctx().databaseUrl), NODE_OPTIONS: '--import=tsx' };
    const passes = await Promise.all([1, 2].map(() => runNode(PURGE_PASS, [String(later), String(startAt)], env)));
    for (const pass of passes) expect({ code: pass.code, stderr: pass.stderr }).toEqual({ code: 0, stderr: '' });
    const results = passes.map((pass) => JSON.parse(pass.stdout) as { purged: number; waited: boolean });
    // Both were ready before the moment: the passes did run at the same time.
    expect(results.map((result) => result.waited)).toEqual([true, true]);
    expect(results.reduce((sum, result) => sum + result.purged, 0)).toBe(3);
    const deleted = await app.db.selectFrom('events').select('owner_id').where('type', '=', 'user.deleted').execute();
    expect(deleted.map((event) => event.owner_id).sort()).toEqual([...ids].sort());
    expect(await app.db.selectFrom('users').select('id').where('id', 'in', ids).execute()).toEqual([]);
    expect(await derivedDataMismatches(app.db)).toEqual(NO_MISMATCHES);
    expect(await purgeDueAccounts(app.db, later)).toBe(0);
  });
});
