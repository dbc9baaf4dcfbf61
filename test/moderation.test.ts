import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { createMigrator, migrateToLatest, unwrap } from '../src/db/migrate.js';
import { publishDueArticles } from '../src/modules/articles/scheduler.js';
import { describeEachDatabase, withDatabase } from './support/app.js';
import {
  addComment,
  articleIdOf,
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
import {
  auditEntriesAfter,
  authorModerates,
  footprint,
  grantRole,
  lastAuditId,
  MODERATION_FORBIDDEN,
  moderate,
  moderationNotices,
  putRole,
} from './support/moderation.js';
import { childEnv, runConduit } from './support/processes.js';
import { injectedText } from './support/sse.js';

/** A live stream read here stays open (after its moment of reading) until the app closes. */
const STEADY = { WEBHOOKS_DELIVERY: 'off', EVENT_STREAMS_PER_CLIENT: '0' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const SUSPENDED = { errors: { account: ['suspended'] } };
const leave = (app: FastifyInstance, user: TestUser) =>
  call(app, 'DELETE', '/api/user', { token: user.token, body: { user: { password: user.password } } });
const cancelLeaving = (app: FastifyInstance, user: TestUser) => call(app, 'DELETE', '/api/user/deletion', { token: user.token });

/** An article with a tag of its own and a word in its body alone, so that every place that could show it can be asked. */
async function traceableArticle(app: FastifyInstance, author: TestUser) {
  const tag = unique('mod');
  const word = unique('zq');
  const article = await createArticle(app, author.token, { body: `Says ${word}`, tagList: [tag] });
  return { ...article, tag, word } as { slug: string; title: string; tag: string; word: string };
}

describeEachDatabase(
  'moderation',
  (ctx) => {
    const app = () => ctx().app;

    it('refuses every moderation route to a plain user, to a moderator over an equal or higher role, and to anyone acting on themselves; 401 without a token', async () => {
      const admin = await registerUser(app(), 'admin');
      const moderator = await registerUser(app(), 'mod');
      const otherModerator = await registerUser(app(), 'mod');
      const plain = await registerUser(app(), 'plain');
      const member = await registerUser(app(), 'member');
      await grantRole(app(), admin, 'admin');
      await grantRole(app(), moderator, 'moderator');
      await grantRole(app(), otherModerator, 'moderator');
      const since = await lastAuditId(app());

      /** An article and a comment of `owner`'s, and every moderation request that reaches owner, as [what, send]. */
      async function requestsOn(owner: TestUser) {
        const article = await createArticle(app(), owner.token);
        const comment = await addComment(app(), owner.token, article.slug);
        const sends: Array<[string, (token?: string) => ReturnType<typeof call>]> = [];
        for (const verb of ['hide', 'unhide'] as const) {
          sends.push([`${verb} article`, (token) => moderate(app(), token, `articles/${article.slug}`, verb)]);
          sends.push([`${verb} comment`, (token) => moderate(app(), token, `comments/${comment.id}`, verb)]);
        }
        for (const verb of ['suspend', 'unsuspend'] as const) {
          sends.push([verb, (token) => moderate(app(), token, `users/${owner.username}`, verb)]);
        }
        return { article, sends };
      }
      const roleChange = (target: TestUser) => (token?: string) => putRole(app(), token, target.username, 'moderator');
      const auditLog = (token?: string) => call(app(), 'GET', '/api/moderation/audit-log', { token });

      const refusals: Array<[string, TestUser | undefined, (token?: string) => ReturnType<typeof call>]> = [];
      const onMember = await requestsOn(member);
      for (const [what, send] of onMember.sends) refusals.push([`a user: ${what}`, plain, send]);
      refusals.push(['a user: role', plain, roleChange(member)], ['a user: audit log', plain, auditLog]);
      for (const [owner, whose] of [
        [admin, 'an admin'],
        [otherModerator, 'another moderator'],
        [moderator, 'themselves'],
      ] as const) {
        for (const [what, send] of (await requestsOn(owner)).sends) refusals.push([`a moderator on ${whose}: ${what}`, moderator, send]);
      }
      // Roles and the log are the admins' alone, whoever the target.
      refusals.push(['a moderator: role', moderator, roleChange(member)], ['a moderator: audit log', moderator, auditLog]);
      for (const [what, send] of (await requestsOn(admin)).sends) refusals.push([`an admin on themselves: ${what}`, admin, send]);
      refusals.push(['an admin on themselves: role', admin, (token) => putRole(app(), token, admin.username, 'user')]);

      for (const [what, user, send] of refusals) {
        const response = await send(user?.token);
        expect({ what, status: response.status, body: response.body }).toEqual({ what, status: 403, body: MODERATION_FORBIDDEN });
        const anonymous = await send();
        expect({ what, status: anonymous.status, body: anonymous.body }).toEqual({
          what,
          status: 401,
          body: { errors: { token: ['is missing'] } },
        });
      }
      expect(refusals.length).toBeGreaterThan(30);

      // Nothing happened: the member's content is public, nobody was told anything, the log holds nothing new.
      expect((await call(app(), 'GET', `/api/articles/${onMember.article.slug}`)).status).toBe(200);
      for (const user of [admin, moderator, otherModerator, member]) expect(await moderationNotices(app(), user.token)).toEqual([]);
      expect(await auditEntriesAfter(app(), admin.token, since)).toEqual([]);
      expect((await call(app(), 'GET', '/api/user', { token: moderator.token })).body.user.role).toBe('moderator');

      // The same moderator may act on a plain user: the refusals above were about rank, not a broken route.
      expect((await moderate(app(), moderator.token, `articles/${onMember.article.slug}`, 'hide')).status).toBe(200);
    });

    it('hides an article from everyone but its author, everywhere, tells the author, and unhiding restores exactly what was there', async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const admin = await registerUser(app(), 'admin');
      await grantRole(app(), admin, 'admin');
      const author = await registerUser(app(), 'author');
      const follower = await registerUser(app(), 'follower');
      const stranger = await registerUser(app(), 'stranger');
      await setFollowing(app(), follower.token, author.username);
      const article = await traceableArticle(app(), author);
      await setFavorite(app(), stranger.token, article.slug);
      await addComment(app(), stranger.token, article.slug);
      const people = { author: author.username, follower, favoriter: stranger, stranger };
      const since = await lastAuditId(app());
      const articleId = await articleIdOf(app(), article.slug);

      const before = await footprint(app(), article, people);
      // Everything below must be able to change: it all shows the article now.
      expect(before).toMatchObject({ article: 200, articleSignedIn: 200, comments: 200, tagListed: true });
      for (const place of ['all', 'byTag', 'byAuthor', 'favorited', 'feed', 'search'] as const)
        expect(before[place].listed, place).toBe(true);
      expect(Object.values(before.feeds)).toEqual(Array(9).fill(true));

      const reason = 'Spam: links to a shop';
      const hidden = await moderate(app(), moderator.token, `articles/${article.slug}`, 'hide', reason);
      expect(hidden.status).toBe(200);
      expect(hidden.body.article).toMatchObject({ slug: article.slug, moderation: { hidden: true, reason } });
      // Twice: nothing more happens, and the author is told once.
      expect((await moderate(app(), moderator.token, `articles/${article.slug}`, 'hide', 'Again')).body.article.moderation).toEqual({
        hidden: true,
        reason,
      });

      const during = await footprint(app(), article, people);
      const dropped = (place: { count: number }) => ({ listed: false, count: place.count - 1 });
      expect(during).toEqual({
        article: 404,
        articleSignedIn: 404,
        comments: 404,
        all: dropped(before.all),
        byTag: { listed: false, count: 0 },
        byAuthor: dropped(before.byAuthor),
        favorited: dropped(before.favorited),
        feed: dropped(before.feed),
        search: { listed: false, count: 0 },
        tagListed: false,
        feeds: Object.fromEntries(Object.keys(before.feeds).map((key) => [key, false])),
      });
      expect((await call(app(), 'GET', `/api/articles/${article.slug}`, { token: stranger.token })).body).toEqual({
        errors: { article: ['not found'] },
      });
      // Not even a favorite or a comment reaches it, and a moderator reading it is no author.
      for (const [method, path, body] of [
        ['POST', 'favorite', undefined],
        ['DELETE', 'favorite', undefined],
        ['POST', 'comments', { comment: { body: 'Still here?' } }],
      ] as const) {
        const response = await call(app(), method, `/api/articles/${article.slug}/${path}`, { token: stranger.token, body });
        expect([method, path, response.status]).toEqual([method, path, 404]);
      }
      expect(await derivedDataMismatches(app().db)).toEqual(NO_MISMATCHES);

      // Its author still has it, saying why.
      const own = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: author.token });
      expect(own.status).toBe(200);
      expect(own.body.article.moderation).toEqual({ hidden: true, reason });
      const ownList = await call(app(), 'GET', '/api/user/articles', { token: author.token });
      expect(ownList.body.articles.find((item: { slug: string }) => item.slug === article.slug)?.moderation).toEqual({
        hidden: true,
        reason,
      });
      const notices = await moderationNotices(app(), author.token);
      expect(notices).toHaveLength(1);
      expect(notices[0]).toMatchObject({
        kind: 'moderation',
        actor: { username: moderator.username },
        article: { slug: article.slug, title: article.title },
        moderation: { decision: expect.any(Number), action: 'article.hidden', reason, until: null },
      });

      const shown = await moderate(app(), moderator.token, `articles/${article.slug}`, 'unhide', null);
      expect(shown.status).toBe(200);
      expect(shown.body.article).not.toHaveProperty('moderation');
      expect(await footprint(app(), article, people)).toEqual(before);
      expect(await derivedDataMismatches(app().db)).toEqual(NO_MISMATCHES);
      expect((await call(app(), 'GET', `/api/articles/${article.slug}`, { token: author.token })).body.article).not.toHaveProperty(
        'moderation',
      );
      expect((await moderationNotices(app(), author.token)).map((notice) => notice.moderation.action)).toEqual([
        'article.unhidden',
        'article.hidden',
      ]);

      const entries = await auditEntriesAfter(app(), admin.token, since);
      expect(entries.map(({ actor, action, target, reason }) => ({ actor, action, target, reason }))).toEqual([
        { actor: moderator.username, action: 'article.unhidden', target: { type: 'article', id: articleId }, reason: null },
        { actor: moderator.username, action: 'article.hidden', target: { type: 'article', id: articleId }, reason },
      ]);
    });

    it('keeps a hide and an author leaving apart: either one alone keeps the article from others', async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const author = await registerUser(app(), 'author');
      const article = await createArticle(app(), author.token);
      const publicStatus = async () => (await call(app(), 'GET', `/api/articles/${article.slug}`)).status;

      // Hidden, then the author leaves and comes back: still hidden.
      expect((await moderate(app(), moderator.token, `articles/${article.slug}`, 'hide')).status).toBe(200);
      expect((await leave(app(), author)).status).toBe(202);
      expect((await cancelLeaving(app(), author)).status).toBe(200);
      expect(await publicStatus()).toBe(404);
      expect((await call(app(), 'GET', `/api/articles/${article.slug}`, { token: author.token })).body.article.moderation).toMatchObject({
        hidden: true,
      });

      // The author leaves, and a moderator shows the article meanwhile: still gone until the author comes back.
      expect((await leave(app(), author)).status).toBe(202);
      expect((await moderate(app(), moderator.token, `articles/${article.slug}`, 'unhide', null)).status).toBe(200);
      expect(await publicStatus()).toBe(404);
      expect((await cancelLeaving(app(), author)).status).toBe(200);
      expect(await publicStatus()).toBe(200);
      expect(await derivedDataMismatches(app().db)).toEqual(NO_MISMATCHES);
    });

    it("hides a comment from everyone but its author and the article's author, by a moderator or by the article's author", async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const [author, commenter, other] = [
        await registerUser(app(), 'author'),
        await registerUser(app(), 'commenter'),
        await registerUser(app(), 'other'),
      ];
      const article = await createArticle(app(), author.token);
      const first = await addComment(app(), commenter.token, article.slug);
      const second = await addComment(app(), other.token, article.slug);
      const own = await addComment(app(), author.token, article.slug);
      const seen = async (viewer?: TestUser) => {
        const response = await call(app(), 'GET', `/api/articles/${article.slug}/comments`, { token: viewer?.token });
        return response.body.comments.map((comment: { id: number; moderation?: unknown }) => [comment.id, comment.moderation ?? null]);
      };
      const reason = 'Harassment';
      const hiddenMark = { hidden: true, reason };

      const byModerator = await moderate(app(), moderator.token, `comments/${first.id}`, 'hide', reason);
      expect(byModerator.status).toBe(200);
      expect(byModerator.body.comment).toMatchObject({ id: first.id, body: first.body, moderation: hiddenMark });
      expect(await seen()).toEqual([
        [second.id, null],
        [own.id, null],
      ]);
      expect(await seen(other)).toEqual(await seen());
      const everything = [
        [first.id, hiddenMark],
        [second.id, null],
        [own.id, null],
      ];
      expect(await seen(commenter)).toEqual(everything);
      expect(await seen(author)).toEqual(everything);
      // Moderators read what they judge, as they read a hidden article (CONTRACT.md, Lifecycle, "Who sees what").
      expect(await seen(moderator)).toEqual(everything);
      const notices = await moderationNotices(app(), commenter.token);
      expect(notices).toHaveLength(1);
      expect(notices[0]).toMatchObject({
        actor: { username: moderator.username },
        article: { slug: article.slug },
        comment: { id: first.id },
        moderation: { action: 'comment.hidden', reason, until: null },
      });

      // The article's author cannot undo a moderator's hide; nobody else may use the author's route at all.
      const forbidden = { status: 403, body: { errors: { comment: ['forbidden'] } } };
      const pick = ({ status, body }: { status: number; body: unknown }) => ({ status, body });
      expect(pick(await authorModerates(app(), author.token, article.slug, first.id, 'unhide'))).toEqual(forbidden);
      expect(pick(await authorModerates(app(), other.token, article.slug, first.id, 'unhide'))).toEqual(forbidden);
      expect(pick(await authorModerates(app(), commenter.token, article.slug, second.id, 'hide'))).toEqual(forbidden);
      expect(pick(await authorModerates(app(), author.token, article.slug, own.id, 'hide'))).toEqual(forbidden);
      expect((await authorModerates(app(), author.token, article.slug, 999_999, 'hide')).status).toBe(404);
      expect(
        (await call(app(), 'POST', `/api/articles/${article.slug}/comments/${second.id}/hide`, { token: author.token, body: {} })).status,
      ).toBe(422);

      // What the article's author hid, the article's author may show again.
      const byAuthor = await authorModerates(app(), author.token, article.slug, second.id, 'hide', 'Off topic');
      expect(byAuthor.status).toBe(200);
      expect(byAuthor.body.comment.moderation).toEqual({ hidden: true, reason: 'Off topic' });
      expect(await seen()).toEqual([[own.id, null]]);
      expect(await seen(other)).toEqual([
        [second.id, { hidden: true, reason: 'Off topic' }],
        [own.id, null],
      ]);
      expect((await moderationNotices(app(), other.token)).map((notice) => [notice.actor.username, notice.moderation.action])).toEqual([
        [author.username, 'comment.hidden'],
      ]);
      expect((await authorModerates(app(), author.token, article.slug, second.id, 'unhide')).status).toBe(200);
      expect((await moderate(app(), moderator.token, `comments/${first.id}`, 'unhide', null)).status).toBe(200);
      expect(await seen()).toEqual(everything.map(([id]) => [id, null]));
      expect((await moderationNotices(app(), commenter.token)).map((notice) => notice.moderation.action)).toEqual([
        'comment.unhidden',
        'comment.hidden',
      ]);
    });

    it("keeps a comment a moderator hid hidden from the article's author's unhide, even when the author had hidden it first", async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const [author, commenter] = [await registerUser(app(), 'author'), await registerUser(app(), 'commenter')];
      const article = await createArticle(app(), author.token);
      const comment = await addComment(app(), commenter.token, article.slug);
      expect((await authorModerates(app(), author.token, article.slug, comment.id, 'hide')).status).toBe(200);
      expect((await moderate(app(), moderator.token, `comments/${comment.id}`, 'hide', 'Illegal content')).status).toBe(200);
      // The moderator's decision stands: the author's unhide cannot take it back, and the commenter learns its reason.
      expect((await authorModerates(app(), author.token, article.slug, comment.id, 'unhide')).status).toBe(403);
      expect((await moderationNotices(app(), commenter.token)).map((notice) => [notice.actor.username, notice.moderation.reason])).toEqual([
        [moderator.username, 'Illegal content'],
        [author.username, 'Off topic'],
      ]);
      const seenByAuthor = await call(app(), 'GET', `/api/articles/${article.slug}/comments`, { token: author.token });
      expect(seenByAuthor.body.comments[0].moderation).toEqual({ hidden: true, reason: 'Illegal content' });
      expect((await moderate(app(), moderator.token, `comments/${comment.id}`, 'unhide', null)).status).toBe(200);
      expect((await call(app(), 'GET', `/api/articles/${article.slug}/comments`)).body.comments).toHaveLength(1);
    });

    it('keeps a hidden comment out of the public event stream, a replay from before it included', async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const [author, commenter] = [await registerUser(app(), 'author'), await registerUser(app(), 'commenter')];
      const article = await createArticle(app(), author.token);
      const from = Number(
        (
          await app()
            .db.selectFrom('events')
            .select((eb) => eb.fn.max('id').as('id'))
            .executeTakeFirstOrThrow()
        ).id,
      );
      const shown = await addComment(app(), commenter.token, article.slug, unique('Shown '));
      const hidden = await addComment(app(), commenter.token, article.slug, unique('Hidden '));
      expect((await moderate(app(), moderator.token, `comments/${hidden.id}`, 'hide')).status).toBe(200);
      const replay = await injectedText(app(), `/api/events?lastEventId=${from}`, { stream: true, replaying: true });
      expect(replay.status).toBe(200);
      // The replay came (the other comment is in it), and the hidden one's body is not.
      expect(replay.body).toContain(shown.body);
      expect(replay.body).not.toContain(hidden.body);
    });

    it('lifts a hide or a suspension sent with no body at all: its reason is optional', async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const author = await registerUser(app(), 'author');
      const article = await createArticle(app(), author.token);
      expect((await moderate(app(), moderator.token, `articles/${article.slug}`, 'hide')).status).toBe(200);
      expect((await moderate(app(), moderator.token, `users/${author.username}`, 'suspend')).status).toBe(200);
      for (const target of [`articles/${article.slug}/unhide`, `users/${author.username}/unsuspend`]) {
        const lifted = await call(app(), 'POST', `/api/moderation/${target}`, { token: moderator.token });
        expect(lifted.status, target).toBe(200);
      }
      expect((await call(app(), 'GET', `/api/articles/${article.slug}`)).status).toBe(200);
    });

    // CONTRACT.md, Lifecycle, "Who sees what": an article that is not public exists for its author and for moderators.
    it('shows a hidden article, its hidden comments and its revisions to moderators, and to nobody else', async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const author = await registerUser(app(), 'author');
      const reader = await registerUser(app(), 'reader');
      const article = await createArticle(app(), author.token);
      const comment = await addComment(app(), reader.token, article.slug);
      expect((await moderate(app(), moderator.token, `comments/${comment.id}`, 'hide')).status).toBe(200);
      expect((await moderate(app(), moderator.token, `articles/${article.slug}`, 'hide')).status).toBe(200);
      const seen = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: moderator.token });
      expect(seen.status).toBe(200);
      expect(seen.body.article.moderation).toEqual({ hidden: true, reason: expect.any(String) });
      const comments = await call(app(), 'GET', `/api/articles/${article.slug}/comments`, { token: moderator.token });
      expect(comments.body.comments.map((shown: { id: number }) => shown.id)).toEqual([comment.id]);
      expect((await call(app(), 'GET', `/api/articles/${article.slug}/revisions`, { token: moderator.token })).status).toBe(200);
      for (const token of [reader.token, undefined]) {
        expect((await call(app(), 'GET', `/api/articles/${article.slug}`, { token })).status).toBe(404);
        expect((await call(app(), 'GET', `/api/articles/${article.slug}/revisions`, { token })).status).toBe(404);
      }
      // A moderator reads by address; lists stay public-only for them too.
      const listed = await call(app(), 'GET', `/api/articles?author=${author.username}`, { token: moderator.token });
      expect(listed.body.articlesCount).toBe(0);
    });

    it('lets a suspended account read but refuses its every write with the reason, until unsuspended or its end passes', async () => {
      const moderator = await registerUser(app(), 'mod');
      await grantRole(app(), moderator, 'moderator');
      const suspended = await registerUser(app(), 'suspended');
      const other = await registerUser(app(), 'other');
      const own = await createArticle(app(), suspended.token);
      const others = await createArticle(app(), other.token);
      const comment = await addComment(app(), suspended.token, others.slug);
      const token = suspended.token;
      const writes: Array<[string, () => ReturnType<typeof call>]> = [
        [
          'create article',
          () => call(app(), 'POST', '/api/articles', { token, body: { article: { title: unique('T'), description: 'd', body: 'b' } } }),
        ],
        ['update article', () => call(app(), 'PUT', `/api/articles/${own.slug}`, { token, body: { article: { body: 'Changed' } } })],
        ['delete article', () => call(app(), 'DELETE', `/api/articles/${own.slug}`, { token })],
        ['favorite', () => call(app(), 'POST', `/api/articles/${others.slug}/favorite`, { token })],
        ['unfavorite', () => call(app(), 'DELETE', `/api/articles/${others.slug}/favorite`, { token })],
        ['comment', () => call(app(), 'POST', `/api/articles/${others.slug}/comments`, { token, body: { comment: { body: 'Hi' } } })],
        ['delete comment', () => call(app(), 'DELETE', `/api/articles/${others.slug}/comments/${comment.id}`, { token })],
        ['follow', () => call(app(), 'POST', `/api/profiles/${other.username}/follow`, { token })],
        ['unfollow', () => call(app(), 'DELETE', `/api/profiles/${other.username}/follow`, { token })],
        ['update user', () => call(app(), 'PUT', '/api/user', { token, body: { user: { bio: 'New bio' } } })],
        [
          'webhook',
          () =>
            call(app(), 'POST', '/api/webhooks', {
              token,
              body: { webhook: { url: 'https://hooks.example.com/x', events: ['article.created'] } },
            }),
        ],
      ];
      const refusedWith = async (body: unknown) => {
        for (const [what, send] of writes) {
          const response = await send();
          expect({ what, status: response.status, body: response.body }).toEqual({ what, status: 403, body });
        }
      };
      const reads = async () => {
        for (const url of ['/api/articles', '/api/user', `/api/articles/${others.slug}/comments`, '/api/notifications']) {
          expect([url, (await call(app(), 'GET', url, { token })).status]).toEqual([url, 200]);
        }
      };

      const reason = 'Repeated spam';
      const response = await moderate(app(), moderator.token, `users/${suspended.username}`, 'suspend', reason);
      expect(response.status).toBe(200);
      expect(response.body.user).toEqual({
        username: suspended.username,
        role: 'user',
        suspension: { since: expect.any(String), until: null, reason },
      });
      await reads();
      await refusedWith(SUSPENDED);
      // Nothing was written meanwhile.
      expect((await call(app(), 'GET', `/api/articles/${own.slug}`)).body.article.body).toBe('The body');
      expect((await call(app(), 'GET', `/api/articles/${others.slug}/comments`)).body.comments).toHaveLength(1);
      // What a suspended account may still do: read its notices, mark them read, leave and change its mind.
      expect((await call(app(), 'POST', '/api/notifications/read', { token })).status).toBe(200);
      expect((await leave(app(), suspended)).status).toBe(202);
      expect((await cancelLeaving(app(), suspended)).status).toBe(200);

      // A suspension with an end names it; one in the past is refused.
      const past = await moderate(app(), moderator.token, `users/${suspended.username}`, 'suspend', reason, {
        until: new Date(Date.now() - 60_000).toISOString(),
      });
      expect([past.status, past.body]).toEqual([422, { errors: { until: ['must be in the future'] } }]);
      // A rule on the request itself: said before the account is looked up (contract: 422, then 404, then 403).
      const pastForNobody = await moderate(app(), moderator.token, 'users/nobody-is-called-this', 'suspend', reason, {
        until: new Date(Date.now() - 60_000).toISOString(),
      });
      expect([pastForNobody.status, pastForNobody.body]).toEqual([422, past.body]);
      const until = new Date(Date.now() + 3_600_000).toISOString();
      const withEnd = await moderate(app(), moderator.token, `users/${suspended.username}`, 'suspend', 'Cooling off', { until });
      expect(withEnd.body.user.suspension).toMatchObject({ until, reason: 'Cooling off' });
      await refusedWith({ errors: { account: [`suspended until ${until}`] } });

      const lifted = await moderate(app(), moderator.token, `users/${suspended.username}`, 'unsuspend', null);
      expect(lifted.body.user.suspension).toBeNull();
      expect((await call(app(), 'PUT', '/api/user', { token, body: { user: { bio: 'Back' } } })).status).toBe(200);
      expect((await moderationNotices(app(), token)).map(({ actor, moderation }) => [actor.username, moderation])).toEqual([
        [moderator.username, { decision: expect.any(Number), action: 'user.unsuspended', reason: null, until: null }],
        [moderator.username, { decision: expect.any(Number), action: 'user.suspended', reason: 'Cooling off', until }],
        [moderator.username, { decision: expect.any(Number), action: 'user.suspended', reason, until: null }],
      ]);

      // A suspension a moment long lifts itself, with no one lifting it.
      const soon = new Date(Date.now() + 1500).toISOString();
      expect((await moderate(app(), moderator.token, `users/${suspended.username}`, 'suspend', 'Brief', { until: soon })).status).toBe(200);
      expect((await call(app(), 'PUT', '/api/user', { token, body: { user: { bio: 'Too soon' } } })).body).toEqual({
        errors: { account: [`suspended until ${soon}`] },
      });
      await sleep(Date.parse(soon) - Date.now() + 50);
      expect((await call(app(), 'PUT', '/api/user', { token, body: { user: { bio: 'Later' } } })).status).toBe(200);
    });

    it('keeps a suspended moderator from moderating', async () => {
      const [moderator, member] = [await registerUser(app(), 'mod'), await registerUser(app(), 'member')];
      const admin = await registerUser(app(), 'admin');
      await grantRole(app(), moderator, 'moderator');
      await grantRole(app(), admin, 'admin');
      const article = await createArticle(app(), member.token);
      expect((await moderate(app(), admin.token, `users/${moderator.username}`, 'suspend')).status).toBe(200);
      const response = await moderate(app(), moderator.token, `articles/${article.slug}`, 'hide');
      expect([response.status, response.body]).toEqual([403, SUSPENDED]);
      expect((await call(app(), 'GET', `/api/articles/${article.slug}`)).status).toBe(200);
    });

    it('makes the first admin with `conduit users role`, lets admins set lower roles, and logs both', { timeout: 60_000 }, async () => {
      const [first, second, member] = [
        await registerUser(app(), 'first'),
        await registerUser(app(), 'second'),
        await registerUser(app(), 'member'),
      ];
      const since = await lastAuditId(app());
      const env = childEnv(ctx().databaseUrl);
      const made = await runConduit(['users', 'role', first.username, 'admin'], env);
      expect(made).toEqual({ code: 0, stdout: `${first.username}: user -> admin\n`, stderr: '' });
      const again = await runConduit(['users', 'role', first.username, 'admin'], env);
      expect(again).toEqual({ code: 0, stdout: `${first.username} is already admin\n`, stderr: '' });
      expect((await call(app(), 'GET', '/api/user', { token: first.token })).body.user.role).toBe('admin');
      expect((await call(app(), 'GET', '/api/user', { token: member.token })).body.user.role).toBe('user');

      const promoted = await putRole(app(), first.token, member.username, 'moderator');
      expect(promoted.status).toBe(200);
      expect(promoted.body).toEqual({ user: { username: member.username, role: 'moderator', suspension: null } });
      expect((await call(app(), 'GET', '/api/user', { token: member.token })).body.user.role).toBe('moderator');
      expect((await putRole(app(), first.token, second.username, 'admin')).status).toBe(200);
      // Two admins: neither may change the other.
      for (const [actor, target] of [
        [first, second],
        [second, first],
      ] as const) {
        const refused = await putRole(app(), actor.token, target.username, 'user');
        expect([refused.status, refused.body]).toEqual([403, MODERATION_FORBIDDEN]);
      }
      expect((await putRole(app(), first.token, 'nobody-is-called-this', 'user')).status).toBe(404);
      expect(
        (await call(app(), 'PUT', `/api/moderation/users/${member.username}`, { token: first.token, body: { user: { role: 'owner' } } }))
          .status,
      ).toBe(422);

      const ids = { first: await userIdOf(app(), first), second: await userIdOf(app(), second), member: await userIdOf(app(), member) };
      const entries = await auditEntriesAfter(app(), first.token, since);
      expect(entries.map(({ actor, action, target, reason }) => ({ actor, action, target, reason }))).toEqual([
        { actor: first.username, action: 'role.changed', target: { type: 'profile', id: ids.second }, reason: 'user to admin' },
        { actor: first.username, action: 'role.changed', target: { type: 'profile', id: ids.member }, reason: 'user to moderator' },
        { actor: 'system', action: 'role.changed', target: { type: 'profile', id: ids.first }, reason: 'user to admin' },
      ]);

      // A demoted moderator is a plain user again.
      expect((await putRole(app(), first.token, member.username, 'user')).status).toBe(200);
      const article = await createArticle(app(), second.token);
      expect((await moderate(app(), member.token, `articles/${article.slug}`, 'hide')).body).toEqual(MODERATION_FORBIDDEN);
    });
  },
  STEADY,
);

describeEachDatabase(
  'the audit log',
  (ctx) => {
    const app = () => ctx().app;

    it('lists every decision, role change, scheduled publication and purge, newest first, page by page', async () => {
      const admin = await registerUser(app(), 'admin');
      await grantRole(app(), admin, 'admin');
      const moderator = await registerUser(app(), 'mod');
      const member = await registerUser(app(), 'member');
      const since = await lastAuditId(app());
      const idOf = (user: TestUser) => userIdOf(app(), user);

      expect((await putRole(app(), admin.token, moderator.username, 'moderator')).status).toBe(200);
      const article = await createArticle(app(), member.token);
      const comment = await addComment(app(), admin.token, article.slug);
      const steps: Array<[() => ReturnType<typeof call>, number]> = [
        [() => moderate(app(), moderator.token, `articles/${article.slug}`, 'hide', 'One'), 200],
        [() => moderate(app(), moderator.token, `articles/${article.slug}`, 'unhide', 'Two'), 200],
        [() => moderate(app(), admin.token, `comments/${comment.id}`, 'hide', 'Three'), 403],
        [() => moderate(app(), moderator.token, `users/${member.username}`, 'suspend', 'Four'), 200],
        [() => moderate(app(), moderator.token, `users/${member.username}`, 'unsuspend', null), 200],
      ];
      for (const [send, status] of steps) expect((await send()).status).toBe(status);
      const ownComment = await addComment(app(), member.token, article.slug);
      expect((await moderate(app(), moderator.token, `comments/${ownComment.id}`, 'hide', 'Five')).status).toBe(200);
      expect((await moderate(app(), moderator.token, `comments/${ownComment.id}`, 'unhide', null)).status).toBe(200);

      // A publication nobody makes: the scheduler records it, as the system.
      const scheduled = await call(app(), 'POST', '/api/articles', {
        token: member.token,
        body: { article: { title: unique('Later '), description: 'd', body: 'b', publishAt: new Date(Date.now() + 600).toISOString() } },
      });
      expect(scheduled.status).toBe(201);
      await sleep(700);
      await publishDueArticles(app().db);
      // An account leaving with no grace is purged at once, by the system too.
      const leaver = await registerUser(app(), 'leaver');
      const leaverId = await idOf(leaver);
      expect((await leave(app(), leaver)).status).toBe(202);

      const articleId = await articleIdOf(app(), article.slug);
      const entries = await auditEntriesAfter(app(), admin.token, since, 3);
      expect(entries.map(({ actor, action, target, reason }) => ({ actor, action, target, reason }))).toEqual([
        { actor: 'system', action: 'user.purged', target: { type: 'profile', id: leaverId }, reason: null },
        {
          actor: 'system',
          action: 'article.published',
          target: { type: 'article', id: await articleIdOf(app(), scheduled.body.article.slug) },
          reason: null,
        },
        { actor: moderator.username, action: 'comment.unhidden', target: { type: 'comment', id: ownComment.id }, reason: null },
        { actor: moderator.username, action: 'comment.hidden', target: { type: 'comment', id: ownComment.id }, reason: 'Five' },
        { actor: moderator.username, action: 'user.unsuspended', target: { type: 'profile', id: await idOf(member) }, reason: null },
        { actor: moderator.username, action: 'user.suspended', target: { type: 'profile', id: await idOf(member) }, reason: 'Four' },
        { actor: moderator.username, action: 'article.unhidden', target: { type: 'article', id: articleId }, reason: 'Two' },
        { actor: moderator.username, action: 'article.hidden', target: { type: 'article', id: articleId }, reason: 'One' },
        {
          actor: admin.username,
          action: 'role.changed',
          target: { type: 'profile', id: await idOf(moderator) },
          reason: 'user to moderator',
        },
      ]);
      // Pages of three give what one page of a hundred does, each entry once.
      expect(entries).toEqual(await auditEntriesAfter(app(), admin.token, since, 100));
      for (const entry of entries) expect(Date.parse(entry.createdAt)).toBeGreaterThan(0);
      expect(entries.map((entry) => entry.id)).toEqual([...entries.map((entry) => entry.id)].sort((a, b) => b - a));
      const last = await call(app(), 'GET', `/api/moderation/audit-log?limit=100`, { token: admin.token });
      expect(last.body.nextCursor).toBeNull();
      // A cursor past the id column's range is the contract's 422, never PostgreSQL's out-of-range error (a 500).
      const beyond = Buffer.from(String(2 ** 40)).toString('base64url');
      const refused = await call(app(), 'GET', `/api/moderation/audit-log?cursor=${beyond}`, { token: admin.token });
      expect([refused.status, refused.body]).toEqual([422, { errors: { cursor: ['is invalid'] } }]);
    });

    it('cannot be changed or emptied by SQL through the app’s own database handle', async () => {
      const admin = await registerUser(app(), 'admin');
      await grantRole(app(), admin, 'admin');
      const db = app().db;
      const rows = () => db.selectFrom('audit_log').selectAll().orderBy('id').execute();
      const before = await rows();
      expect(before.length).toBeGreaterThan(0);
      const statements = [sql`update audit_log set reason = 'x'`, sql`delete from audit_log`];
      if (ctx().kind === 'postgres') statements.push(sql`truncate audit_log`);
      for (const statement of statements) {
        await expect(statement.execute(db)).rejects.toThrow(/append-only/);
        expect(await rows()).toEqual(before);
      }
      expect(await rows()).toEqual(before);
    });
  },
  { ...STEADY, ACCOUNT_DELETION_GRACE: '0' },
);

describeEachDatabase(
  'migration 0018 down and up again',
  (ctx) => {
    it('brings hidden articles back to the public on the way down, and keeps an author leaving withheld', async () => {
      const { app } = ctx();
      const moderator = await registerUser(app, 'mod');
      await grantRole(app, moderator, 'moderator');
      const [author, leaver] = [await registerUser(app, 'author'), await registerUser(app, 'leaver')];
      const hidden = await traceableArticle(app, author);
      const alsoLeaving = await createArticle(app, leaver.token);
      for (const slug of [hidden.slug, alsoLeaving.slug])
        expect((await moderate(app, moderator.token, `articles/${slug}`, 'hide')).status).toBe(200);
      expect((await leave(app, leaver)).status).toBe(202);
      expect((await call(app, 'GET', `/api/articles/${hidden.slug}`)).status).toBe(404);

      await withDatabase(ctx().databaseUrl, async (handle) => {
        expect(unwrap(await createMigrator(handle).migrateTo('0017_scheduled_link_keys')).map((result) => result.migrationName)).toEqual([
          '0023_without_sqlite_samples',
          '0022_screened_ids',
          '0021_profile_time',
          '0020_webhook_fair_share',
          '0019_confusables_unicode_17',
          '0018_moderation',
        ]);
        const withheld = await sql<{ slug: string; withheld: number; listed: boolean }>`
          select slug, withheld, listed_at is not null as listed from articles where slug in (${hidden.slug}, ${alsoLeaving.slug})
          order by slug`.execute(handle.db);
        expect(Object.fromEntries(withheld.rows.map((row) => [row.slug, [Number(row.withheld), Boolean(row.listed)]]))).toEqual({
          [hidden.slug]: [0, true],
          [alsoLeaving.slug]: [1, false],
        });
        expect(await derivedDataMismatches(handle.db)).toEqual(NO_MISMATCHES);
        await migrateToLatest(handle);
      });
      // Up again: nothing is hidden (the hide went with its columns), the leaver's article still waits for its author.
      expect((await call(app, 'GET', `/api/articles/${hidden.slug}`)).status).toBe(200);
      expect((await call(app, 'GET', `/api/articles?tag=${hidden.tag}`)).body.articlesCount).toBe(1);
      expect((await call(app, 'GET', '/api/tags')).body.tags).toContain(hidden.tag);
      expect((await call(app, 'GET', `/api/articles/${alsoLeaving.slug}`)).status).toBe(404);
      expect((await cancelLeaving(app, leaver)).status).toBe(200);
      expect((await call(app, 'GET', `/api/articles/${alsoLeaving.slug}`)).status).toBe(200);
      // The audit log is back, empty and append-only again.
      await grantRole(app, moderator, 'admin');
      await expect(sql`delete from audit_log`.execute(app.db)).rejects.toThrow(/append-only/);
    });
  },
  STEADY,
);
