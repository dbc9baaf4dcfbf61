import fc from 'fast-check';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, registerUser, type TestUser, unique, userIdOf } from './support/client.js';
import { derivedDataMismatches, NO_MISMATCHES } from './support/invariants.js';
import { grantRole, moderate } from './support/moderation.js';
import { injectedText } from './support/sse.js';

type State = 'draft' | 'scheduled' | 'published' | 'unpublished';
const STATES: State[] = ['draft', 'scheduled', 'published', 'unpublished'];
const ALLOWED: Record<State, State[]> = {
  draft: ['scheduled', 'published'],
  scheduled: ['draft', 'published', 'scheduled'],
  published: ['unpublished'],
  unpublished: ['published', 'scheduled', 'draft'],
};
const FEED_FORMATS = ['rss', 'atom', 'json'] as const;
const USERS = 4;
const TAGS = 3;
/** Settings of every app here. */
const SETTINGS = { WEBHOOKS_DELIVERY: 'off', WEBHOOK_ALLOW_LOOPBACK: 'true' };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const iso = (ms: number) => new Date(ms).toISOString();
/** Lowercase letters only: one word to both databases' search. */
const word = () => Array.from({ length: 10 }, () => String.fromCharCode(97 + Math.floor(Math.random() * 26))).join('');
/** A time "a few hundred ms ahead": due during the checks that follow the step that set it. */
const soon = () => Date.now() + 250 + Math.floor(Math.random() * 250);
const FAR_MS = 3_600_000;

interface ModelArticle {
  slug: string;
  title: string;
  /** In its body alone: found in an answer, the body leaked. */
  word: string;
  author: number;
  status: State;
  publishAt: number | null;
  publishedAt: string | null;
  tags: number[];
  favoritedBy: Set<number>;
  /** By whom, and whether a moderator hid it: then only its author and the article's see it. */
  comments: Array<{ id: number; author: number; hidden: boolean }>;
  deleted: boolean;
  /** The reason of a moderator's hide while hidden (then not public, like a draft, but its author sees it); else null. */
  hiddenReason: string | null;
}

type Seen = 'yes' | 'no' | 'maybe';

/**
 * Whether a reader other than the author sees the article in an answer given between t0 and t1 (read rule: public
 * from publishAt on). A scheduled article whose time falls inside that interval may go either way.
 */
function seenBetween(article: ModelArticle, t0: number, t1: number): Seen {
  if (article.deleted || article.hiddenReason !== null) return 'no';
  if (article.status === 'published') return 'yes';
  if (article.status !== 'scheduled') return 'no';
  if (article.publishAt! <= t0) return 'yes';
  return article.publishAt! > t1 ? 'no' : 'maybe';
}

type Step =
  | { kind: 'create'; user: number; start: 'none' | 'draft' | 'published' | 'soon' | 'far'; tags: number[] }
  | { kind: 'edit'; article: number; actor: number; title: boolean; tags: number[] | null }
  | { kind: 'transition'; article: number; actor: number; to: State; when: 'soon' | 'far'; bare: boolean }
  | { kind: 'favorite'; article: number; user: number; on: boolean }
  | { kind: 'comment'; article: number; user: number }
  | { kind: 'follow'; follower: number; followed: number; on: boolean }
  | { kind: 'delete'; article: number; actor: number }
  | { kind: 'wait'; ms: number }
  | { kind: 'hide'; article: number; on: boolean }
  | { kind: 'hideComment'; article: number; comment: number; on: boolean }
  | { kind: 'suspend'; user: number; on: boolean }
  | { kind: 'block' | 'mute'; by: number; target: number; on: boolean };

const user = fc.nat(USERS - 1);
const tagSet = fc.subarray([0, 1, 2]);
/** An article by position among those created so far (deleted ones too); `actor` is the author unless it says another. */
const article = fc.nat(20);
/** A block or mute of another user mostly (of oneself now and then: 422), made more often than lifted. */
const screen = (kind: 'block' | 'mute') =>
  fc
    .record({
      by: user,
      offset: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 8, arbitrary: fc.integer({ min: 1, max: USERS - 1 }) }),
      on: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
    })
    .map(({ by, offset, on }): Step => ({ kind, by, target: (by + offset) % USERS, on }));
const actor = fc.oneof({ weight: 4, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: USERS - 1 }) });
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('create' as const),
      user,
      start: fc.constantFrom('none' as const, 'draft' as const, 'published' as const, 'soon' as const, 'far' as const),
      tags: tagSet,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('edit' as const), article, actor, title: fc.boolean(), tags: fc.option(tagSet) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('transition' as const),
      article,
      actor,
      to: fc.constantFrom(...STATES),
      when: fc.constantFrom('soon' as const, 'far' as const),
      bare: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('favorite' as const), article, user, on: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('comment' as const), article, user }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('follow' as const), follower: user, followed: user, on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), article, actor }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 100, max: 600 }) }) },
  // Moderation, by a moderator of the run's own: as many steps as before, some of them moderators' now.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('hide' as const), article, on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('hideComment' as const), article, comment: fc.nat(10), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('suspend' as const), user, on: fc.boolean() }) },
  // Blocks and mutes between the run's users, cheap steps; for them edits and transitions are a little rarer than
  // before, and comments a little more frequent, so that blocks and mutes meet some comments.
  { weight: 4, arbitrary: screen('block') },
  { weight: 2, arbitrary: screen('mute') },
);

const SUSPENDED = { errors: { account: ['suspended'] } };
const FORBIDDEN_ARTICLE = { errors: { article: ['forbidden'] } };
const FORBIDDEN_PROFILE = { errors: { profile: ['forbidden'] } };

describeEachDatabase(
  'who sees what, under random sequences of writes',
  (ctx) => {
    const app = () => ctx().app;

    it('every read path shows a stranger, the author and a follower exactly what the model says', async () => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
          runs++;
          const model = await newRun();
          try {
            for (const [index, next] of steps.entries()) {
              model.log.push(JSON.stringify(next));
              await apply(model, next);
              await checkEverything(model, index);
            }
          } finally {
            await cleanUp(model);
          }
        }),
        { numRuns: 15, endOnFailure: true },
      );
      expect(runs).toBe(15);
    }, 240_000);

    interface Run {
      users: TestUser[];
      moderator: TestUser;
      /** The users suspended now: every write of theirs is refused (403) and changes nothing. */
      suspended: Set<number>;
      userIds: number[];
      tags: string[];
      runWord: string;
      articles: ModelArticle[];
      follows: Set<string>;
      /** `blocker>blocked`: the two are separated, both ways (no follow, favorite or comment across; no reading). */
      blocks: Set<string>;
      /** `muter>muted`: the muted user's articles and comments leave the muter's lists alone. */
      mutes: Set<string>;
      log: string[];
      created: number;
    }

    let sharedModerator: TestUser | undefined;

    async function newRun(): Promise<Run> {
      const users: TestUser[] = [];
      for (let i = 0; i < USERS; i++) users.push(await registerUser(app(), `v${i}`));
      const tagPrefix = unique('t');
      // One moderator for every run: a registration (its password hash) per run would add up.
      if (sharedModerator === undefined) {
        sharedModerator = await registerUser(app(), 'vmod');
        await grantRole(app(), sharedModerator, 'moderator');
      }
      const moderator = sharedModerator;
      return {
        users,
        moderator,
        suspended: new Set(),
        userIds: await Promise.all(users.map((u) => userIdOf(app(), u))),
        tags: Array.from({ length: TAGS }, (_, i) => `${tagPrefix}${i}`),
        runWord: word(),
        articles: [],
        follows: new Set(),
        blocks: new Set(),
        mutes: new Set(),
        log: [],
        created: 0,
      };
    }

    /**
     * Every article of the run goes, so that the next run's global lists, counts and tags start empty. Blocks and
     * mutes stay: they name this run's users only, and the next run has users of its own.
     */
    async function cleanUp(model: Run) {
      for (const user of model.suspended) {
        expect((await moderate(app(), model.moderator.token, `users/${model.users[user]!.username}`, 'unsuspend', null)).status).toBe(200);
      }
      for (const article of model.articles.filter((a) => !a.deleted)) {
        await call(app(), 'DELETE', `/api/articles/${article.slug}`, { token: model.users[article.author]!.token });
      }
      const { rows } = await sql<{ n: number | string }>`select count(*) as n from articles`.execute(app().db);
      expect(Number(rows[0]!.n)).toBe(0);
    }

    const tokenOf = (model: Run, viewer: number | null) => (viewer === null ? undefined : model.users[viewer]!.token);
    const get = (model: Run, url: string, viewer: number | null) => call(app(), 'GET', url, { token: tokenOf(model, viewer) });
    const follows = (model: Run, follower: number | null, followed: number) =>
      follower !== null && model.follows.has(`${follower}>${followed}`);
    /** Whether a block stands between the two, made by either. */
    const separated = (model: Run, viewer: number | null, other: number) =>
      viewer !== null && (model.blocks.has(`${viewer}>${other}`) || model.blocks.has(`${other}>${viewer}`));
    /** Whether the viewer's lists leave out what `author` writes: separated from them, or muting them. */
    const screens = (model: Run, viewer: number | null, author: number) =>
      separated(model, viewer, author) || (viewer !== null && model.mutes.has(`${viewer}>${author}`));
    /** The relations of `other`'s profile as `viewer` reads it. */
    const relationOf = (model: Run, viewer: number, other: number) => ({
      following: follows(model, viewer, other),
      blocking: model.blocks.has(`${viewer}>${other}`),
      muting: model.mutes.has(`${viewer}>${other}`),
    });
    const context = (model: Run, what: string) => `${what}\nsteps:\n${model.log.join('\n')}`;

    /**
     * A scheduled article about to fall due is waited for before a write on it, so that the model knows which state
     * the server judges the write on: published from then on.
     */
    async function settle(article: ModelArticle) {
      if (article.deleted || article.status !== 'scheduled') return;
      const left = article.publishAt! - Date.now();
      if (left >= 1000) return;
      await sleep(left + 15);
      article.status = 'published';
      article.publishedAt ??= iso(article.publishAt!);
      article.publishAt = null;
    }

    /** The article answer of a successful write by its author, as the model's new state of it. */
    function takeAnswer(article: ModelArticle, answer: Record<string, any>) {
      if (article.publishedAt !== null) expect(answer.publishedAt).toBe(article.publishedAt);
      article.slug = answer.slug;
      article.title = answer.title;
      article.status = answer.status;
      article.publishAt = answer.publishAt === null ? null : Date.parse(answer.publishAt);
      article.publishedAt = answer.publishedAt;
    }

    /** The status code a write by `actor` on `article` gets when its author would be allowed (visibility, then ownership). */
    const notAuthorsWrite = (article: ModelArticle) =>
      article.deleted || article.hiddenReason !== null || article.status !== 'published' ? 404 : 403;

    /** Whether `user` is suspended, and then that the write was refused as such (and the caller changes nothing). */
    function refusedAsSuspended(model: Run, user: number, response: { status: number; body: unknown }) {
      if (!model.suspended.has(user)) return false;
      expect([response.status, response.body], context(model, `a write by suspended ${user}`)).toEqual([403, SUSPENDED]);
      return true;
    }

    async function apply(model: Run, next: Step) {
      const pick = (index: number) => model.articles[index % model.articles.length];
      const actorFor = (article: ModelArticle, actor: number) => (actor === -1 ? article.author : (article.author + actor) % USERS);
      switch (next.kind) {
        case 'create': {
          const n = model.created++;
          const title = `Vis${model.runWord}x${String(n).padStart(3, '0')}z`;
          const own = word();
          const lifecycle =
            next.start === 'none'
              ? {}
              : next.start === 'soon'
                ? { publishAt: iso(soon()) }
                : next.start === 'far'
                  ? { status: 'scheduled', publishAt: iso(Date.now() + FAR_MS) }
                  : { status: next.start };
          const response = await call(app(), 'POST', '/api/articles', {
            token: model.users[next.user]!.token,
            body: {
              article: {
                title,
                description: 'About',
                body: `${model.runWord} ${own}`,
                tagList: next.tags.map((i) => model.tags[i]),
                ...lifecycle,
              },
            },
          });
          if (refusedAsSuspended(model, next.user, response)) return;
          expect(response.status, context(model, JSON.stringify(response.body))).toBe(201);
          const expected = { none: 'published', published: 'published', draft: 'draft', soon: 'scheduled', far: 'scheduled' }[next.start];
          expect(response.body.article.status).toBe(expected);
          const created: ModelArticle = {
            slug: '',
            title,
            word: own,
            author: next.user,
            status: 'draft',
            publishAt: null,
            publishedAt: null,
            tags: [...next.tags].sort(),
            favoritedBy: new Set(),
            comments: [],
            deleted: false,
            hiddenReason: null,
          };
          takeAnswer(created, response.body.article);
          model.articles.push(created);
          return;
        }
        case 'edit': {
          const target = pick(next.article);
          if (target === undefined) return;
          await settle(target);
          const by = actorFor(target, next.actor);
          const changes: Record<string, unknown> = { body: `${model.runWord} ${target.word} edited` };
          if (next.title) changes.title = `${target.title.slice(0, -1)}e${model.created++}z`;
          if (next.tags !== null) changes.tagList = next.tags.map((i) => model.tags[i]);
          const response = await call(app(), 'PUT', `/api/articles/${target.slug}`, {
            token: model.users[by]!.token,
            body: { article: changes },
          });
          if (refusedAsSuspended(model, by, response)) return;
          const expected = by === target.author && !target.deleted ? 200 : notAuthorsWrite(target);
          expect(response.status, context(model, JSON.stringify(response.body))).toBe(expected);
          if (expected !== 200) return;
          takeAnswer(target, response.body.article);
          if (next.tags !== null) target.tags = [...next.tags].sort();
          return;
        }
        case 'transition': {
          const target = pick(next.article);
          if (target === undefined) return;
          await settle(target);
          const by = actorFor(target, next.actor);
          const publishAt = next.to === 'scheduled' ? iso(next.when === 'soon' ? soon() : Date.now() + FAR_MS) : undefined;
          const changes = next.to === 'scheduled' ? (next.bare ? { publishAt } : { status: next.to, publishAt }) : { status: next.to };
          const from = target.status;
          const response = await call(app(), 'PUT', `/api/articles/${target.slug}`, {
            token: model.users[by]!.token,
            body: { article: changes },
          });
          const why = context(model, `${from} -> ${next.to}: ${JSON.stringify(response.body)}`);
          if (refusedAsSuspended(model, by, response)) return;
          if (by !== target.author || target.deleted) {
            expect(response.status, why).toBe(notAuthorsWrite(target));
            return;
          }
          if (next.to === from && from !== 'scheduled') {
            expect(response.status, why).toBe(200);
            expect(response.body.article).toMatchObject({ status: from, publishedAt: target.publishedAt });
          } else if (ALLOWED[from].includes(next.to)) {
            expect(response.status, why).toBe(200);
            expect(response.body.article).toMatchObject({ status: next.to, publishAt: publishAt ?? null });
          } else {
            expect(response.status, why).toBe(409);
            expect(response.body).toEqual({ errors: { status: [`cannot change from ${from} to ${next.to}`] } });
            return;
          }
          takeAnswer(target, response.body.article);
          return;
        }
        case 'favorite':
        case 'comment': {
          const target = pick(next.article);
          if (target === undefined) return;
          await settle(target);
          const allowed =
            !target.deleted && (next.user === target.author || (target.status === 'published' && target.hiddenReason === null));
          const token = model.users[next.user]!.token;
          const response =
            next.kind === 'comment'
              ? await call(app(), 'POST', `/api/articles/${target.slug}/comments`, { token, body: { comment: { body: 'A comment' } } })
              : await call(app(), next.on ? 'POST' : 'DELETE', `/api/articles/${target.slug}/favorite`, { token });
          const why = context(model, JSON.stringify(response.body));
          if (refusedAsSuspended(model, next.user, response)) return;
          if (!allowed) {
            expect(response.status, why).toBe(404);
            return;
          }
          // Across a block (either way): no comment, no favorite, nor taking one back (its answer is the article).
          if (separated(model, next.user, target.author)) {
            expect([response.status, response.body], why).toEqual([403, FORBIDDEN_ARTICLE]);
            return;
          }
          if (next.kind === 'comment') {
            expect(response.status, why).toBe(201);
            target.comments.push({ id: response.body.comment.id, author: next.user, hidden: false });
            return;
          }
          expect(response.status, why).toBe(200);
          if (next.on) target.favoritedBy.add(next.user);
          else target.favoritedBy.delete(next.user);
          expect(response.body.article).toMatchObject({ favorited: next.on, favoritesCount: target.favoritedBy.size });
          return;
        }
        case 'follow': {
          if (next.follower === next.followed) return;
          const response = await call(app(), next.on ? 'POST' : 'DELETE', `/api/profiles/${model.users[next.followed]!.username}/follow`, {
            token: model.users[next.follower]!.token,
          });
          const why = context(model, JSON.stringify(response.body));
          if (refusedAsSuspended(model, next.follower, response)) return;
          if (next.on && separated(model, next.follower, next.followed)) {
            expect([response.status, response.body], why).toEqual([403, FORBIDDEN_PROFILE]);
            return;
          }
          expect(response.status, why).toBe(200);
          if (next.on) model.follows.add(`${next.follower}>${next.followed}`);
          else model.follows.delete(`${next.follower}>${next.followed}`);
          return;
        }
        case 'delete': {
          const target = pick(next.article);
          if (target === undefined) return;
          await settle(target);
          const by = actorFor(target, next.actor);
          const response = await call(app(), 'DELETE', `/api/articles/${target.slug}`, { token: model.users[by]!.token });
          if (refusedAsSuspended(model, by, response)) return;
          const expected = by === target.author && !target.deleted ? 204 : notAuthorsWrite(target);
          expect(response.status, context(model, JSON.stringify(response.body))).toBe(expected);
          if (expected === 204) target.deleted = true;
          return;
        }
        case 'wait':
          await sleep(next.ms);
          return;
        case 'hide': {
          const target = pick(next.article);
          if (target === undefined) return;
          const reason = `Hidden at step ${model.log.length}`;
          const response = await moderate(
            app(),
            model.moderator.token,
            `articles/${target.slug}`,
            next.on ? 'hide' : 'unhide',
            next.on ? reason : null,
          );
          expect(response.status, context(model, JSON.stringify(response.body))).toBe(target.deleted ? 404 : 200);
          // Hiding what is hidden keeps the first reason.
          if (!target.deleted) target.hiddenReason = next.on ? (target.hiddenReason ?? reason) : null;
          return;
        }
        case 'hideComment': {
          const target = pick(next.article);
          const comment = target?.comments[next.comment % target.comments.length];
          if (target === undefined || comment === undefined) return;
          const response = await moderate(
            app(),
            model.moderator.token,
            `comments/${comment.id}`,
            next.on ? 'hide' : 'unhide',
            next.on ? 'Rude' : null,
          );
          // A deleted article's comments went with it.
          expect(response.status, context(model, JSON.stringify(response.body))).toBe(target.deleted ? 404 : 200);
          comment.hidden = next.on;
          return;
        }
        case 'suspend': {
          const response = await moderate(
            app(),
            model.moderator.token,
            `users/${model.users[next.user]!.username}`,
            next.on ? 'suspend' : 'unsuspend',
            next.on ? 'Cooling off' : null,
          );
          expect(response.status, context(model, JSON.stringify(response.body))).toBe(200);
          if (next.on) model.suspended.add(next.user);
          else model.suspended.delete(next.user);
          return;
        }
        case 'block':
        case 'mute': {
          const path = `/api/profiles/${model.users[next.target]!.username}/${next.kind}`;
          const response = await call(app(), next.on ? 'POST' : 'DELETE', path, { token: model.users[next.by]!.token });
          const why = context(model, JSON.stringify(response.body));
          if (refusedAsSuspended(model, next.by, response)) return;
          if (next.by === next.target) {
            expect([response.status, response.body], why).toEqual([422, { errors: { profile: [`cannot ${next.kind} yourself`] } }]);
            return;
          }
          expect(response.status, why).toBe(200);
          const pair = `${next.by}>${next.target}`;
          const screened = next.kind === 'block' ? model.blocks : model.mutes;
          if (next.on) screened.add(pair);
          else screened.delete(pair);
          // A block ends the follows between the two, both ways; lifting it brings none back.
          if (next.kind === 'block' && next.on) {
            model.follows.delete(pair);
            model.follows.delete(`${next.target}>${next.by}`);
          }
          expect(response.body.profile, why).toMatchObject(relationOf(model, next.by, next.target));
        }
      }
    }

    async function checkEverything(model: Run, stepIndex: number) {
      // What the scheduler has recorded as of now: the kept counts follow that, not the read rule.
      const stored = await app()
        .db.selectFrom('articles')
        .select(['slug', 'status', 'withheld'])
        .where('author_id', 'in', model.userIds)
        .execute();
      const recorded = new Set(stored.filter((row) => row.status === 'published' && row.withheld === 0).map((row) => row.slug));
      const signedIn = stepIndex % USERS;
      // In turn, a user whose lists screen anyone (either side of a block, a muter), else the signed-in one.
      const everyone = model.users.map((_, i) => i);
      const screeners = everyone.filter((u) => everyone.some((other) => screens(model, u, other)));
      const screening = screeners.length > 0 ? screeners[stepIndex % screeners.length]! : signedIn;
      const others = everyone.filter((i) => i !== screening);
      const screenedByThem = others.filter((i) => screens(model, screening, i));
      // Every other step, a user they screen when there is one: the lists named after that user are empty to them.
      const named = stepIndex % 2 === 0 && screenedByThem.length > 0 ? screenedByThem[0]! : others[(stepIndex >> 1) % others.length]!;
      const byName: [string, (a: ModelArticle) => boolean] =
        (stepIndex >> 1) % 2 === 0
          ? ['favorited', (a) => a.favoritedBy.has(named) && !screens(model, screening, named)]
          : ['author', (a) => a.author === named];
      const tag = stepIndex % TAGS;
      for (const article of model.articles) await checkArticle(model, article);
      await checkNonPublicWrites(model);
      await checkAcrossBlocks(model);
      const lists: Array<[string, (a: ModelArticle) => boolean, number | null]> = [
        ['/api/articles?limit=100', () => true, null],
        [`/api/articles?limit=100&q=${model.runWord}`, () => true, null],
        ['/api/articles?limit=100', () => true, signedIn],
        [`/api/articles?limit=100&q=${model.runWord}`, () => true, screening],
        [`/api/articles?limit=100&tag=${model.tags[tag]}`, (a) => a.tags.includes(tag), screening],
        [`/api/articles?limit=100&${byName[0]}=${model.users[named]!.username}`, byName[1], screening],
      ];
      for (const [i, u] of model.users.entries()) {
        lists.push([`/api/articles?limit=100&author=${u.username}`, (a) => a.author === i, null]);
        lists.push([`/api/articles?limit=100&favorited=${u.username}`, (a) => a.favoritedBy.has(i), null]);
        lists.push(['/api/articles/feed?limit=100', (a) => follows(model, i, a.author), i]);
      }
      for (const [i, tag] of model.tags.entries()) {
        lists.push([`/api/articles?limit=100&tag=${tag}`, (a) => a.tags.includes(i), null]);
      }
      lists.push([
        `/api/articles?limit=100&tag=${model.tags[0]}&author=${model.users[0]!.username}`,
        (a) => a.tags.includes(0) && a.author === 0,
        signedIn,
      ]);
      for (const [url, matches, viewer] of lists) await checkList(model, url, matches, viewer, recorded);
      await checkTags(model, recorded);
      await checkFeedDocuments(model, stepIndex);
      for (const u of model.users) expect((await get(model, `/api/profiles/${u.username}`, null)).status).toBe(200);
      for (const other of others) {
        const response = await get(model, `/api/profiles/${model.users[other]!.username}`, screening);
        const why = context(model, `profile of ${other} as ${screening}: ${JSON.stringify(response.body)}`);
        expect(response.status, why).toBe(200);
        expect(response.body.profile, why).toMatchObject(relationOf(model, screening, other));
      }
      // Each user's count of screened accounts (blocks either way, own mutes): what decides whether reads screen.
      const counts = await app().db.selectFrom('users').select(['id', 'screened_count']).where('id', 'in', model.userIds).execute();
      const countOf = (i: number) =>
        [...model.blocks].filter((pair) => pair.split('>').map(Number).includes(i)).length +
        [...model.mutes].filter((pair) => pair.startsWith(`${i}>`)).length;
      expect(
        model.userIds.map((id) => Number(counts.find((row) => row.id === id)?.screened_count)),
        context(model, 'screened_count'),
      ).toEqual(model.users.map((_, i) => countOf(i)));
      expect(await derivedDataMismatches(app().db)).toEqual(NO_MISMATCHES);
    }

    /**
     * The article and its comments as a stranger, as its author, as a follower of the author (or another user), and
     * as a user who screens (blocks, is blocked by or mutes) the author or a commenter when there is one.
     */
    async function checkArticle(model: Run, article: ModelArticle) {
      const other = [1, 2, 3].map((k) => (article.author + k) % USERS);
      const follower = other.find((u) => follows(model, u, article.author)) ?? other[0]!;
      const screener = other.find(
        (u) => u !== follower && (screens(model, u, article.author) || article.comments.some((c) => screens(model, u, c.author))),
      );
      for (const viewer of [null, article.author, follower, ...(screener === undefined ? [] : [screener])]) {
        const t0 = Date.now();
        const response = await get(model, `/api/articles/${article.slug}`, viewer);
        const comments = await get(model, `/api/articles/${article.slug}/comments`, viewer);
        const t1 = Date.now();
        const why = context(model, `GET ${article.slug} as ${viewer}: ${response.status} ${JSON.stringify(response.body)}`);
        // A block hides the article and its comments from the other side, even by its link; a mute does not.
        const seen =
          article.deleted || separated(model, viewer, article.author)
            ? 'no'
            : viewer === article.author
              ? 'yes'
              : seenBetween(article, t0, t1);
        if (seen === 'maybe') {
          expect([200, 404], why).toContain(response.status);
          continue;
        }
        expect(response.status, why).toBe(seen === 'yes' ? 200 : 404);
        expect(comments.status, why).toBe(response.status);
        if (seen === 'no') {
          expect(response.body, why).toEqual({ errors: { article: ['not found'] } });
          continue;
        }
        const answer = response.body.article;
        expect(answer, why).toMatchObject({
          title: article.title,
          tagList: article.tags.map((i) => model.tags[i]).sort(),
          favorited: viewer !== null && article.favoritedBy.has(viewer),
          favoritesCount: article.favoritedBy.size,
          author: { username: model.users[article.author]!.username, following: follows(model, viewer, article.author) },
        });
        // A hidden comment shows to its author and the article's, with why; to nobody else. Nor does one by an author
        // the viewer screens.
        const shownComments = article.comments.filter(
          (c) => (!c.hidden || viewer === article.author || viewer === c.author) && !screens(model, viewer, c.author),
        );
        expect(
          comments.body.comments.map((c: { id: number; moderation?: unknown }) => [c.id, c.moderation ?? null]),
          why,
        ).toEqual(shownComments.map((c) => [c.id, c.hidden ? { hidden: true, reason: 'Rude' } : null]));
        expect(answer.moderation ?? null, why).toEqual(
          article.hiddenReason === null ? null : { hidden: true, reason: article.hiddenReason },
        );
        if (article.status === 'scheduled' && article.publishAt! <= t1) {
          // Due, or falling due during the request: scheduled before, published (at publishAt) after.
          if (answer.status === 'published') {
            expect(answer, why).toMatchObject({ publishAt: null, publishedAt: article.publishedAt ?? iso(article.publishAt!) });
          } else {
            expect(answer, why).toMatchObject({ status: 'scheduled', publishAt: iso(article.publishAt!) });
          }
        } else {
          expect(answer, why).toMatchObject({
            status: article.status,
            publishAt: article.publishAt === null ? null : iso(article.publishAt),
            publishedAt: article.publishedAt,
          });
        }
      }
    }

    /** Nobody but the author may favorite or comment on an article that is not public: 404, and nothing written. */
    async function checkNonPublicWrites(model: Run) {
      const hidden = model.articles.filter(
        (a) =>
          a.deleted ||
          a.hiddenReason !== null ||
          a.status === 'draft' ||
          a.status === 'unpublished' ||
          (a.status === 'scheduled' && a.publishAt! > Date.now() + 1000),
      );
      for (const article of hidden) {
        const strangerIndex = (article.author + 1) % USERS;
        const stranger = model.users[strangerIndex]!.token;
        const favorite = await call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: stranger });
        const comment = await call(app(), 'POST', `/api/articles/${article.slug}/comments`, {
          token: stranger,
          body: { comment: { body: 'Sneaky' } },
        });
        // A suspended stranger is refused before the article is even looked up.
        const refusal = model.suspended.has(strangerIndex) ? 403 : 404;
        expect([favorite.status, comment.status], context(model, article.slug)).toEqual([refusal, refusal]);
      }
    }

    /** Across each block, both ways: no follow, and no favorite or comment on a public article of the other's (403). */
    async function checkAcrossBlocks(model: Run) {
      for (const pair of model.blocks) {
        const [blocker, blocked] = pair.split('>').map(Number) as [number, number];
        const sides = [
          [blocker, blocked],
          [blocked, blocker],
        ] as const;
        for (const [actor, other] of sides) {
          const token = model.users[actor]!.token;
          // A suspended user is refused before anything else is asked.
          const refused = (forbidden: unknown) => (model.suspended.has(actor) ? [403, SUSPENDED] : [403, forbidden]);
          const follow = await call(app(), 'POST', `/api/profiles/${model.users[other]!.username}/follow`, { token });
          expect([follow.status, follow.body], context(model, `${actor} follows ${other} across a block`)).toEqual(
            refused(FORBIDDEN_PROFILE),
          );
          const target = model.articles.find(
            (a) => a.author === other && !a.deleted && a.hiddenReason === null && a.status === 'published',
          );
          if (target === undefined) continue;
          const favorite = await call(app(), 'POST', `/api/articles/${target.slug}/favorite`, { token });
          const unfavorite = await call(app(), 'DELETE', `/api/articles/${target.slug}/favorite`, { token });
          const comment = await call(app(), 'POST', `/api/articles/${target.slug}/comments`, {
            token,
            body: { comment: { body: 'Across a block' } },
          });
          const why = context(model, `${actor} favorites and comments on ${target.slug} of ${other} across a block`);
          expect([favorite.status, favorite.body], why).toEqual(refused(FORBIDDEN_ARTICLE));
          expect([unfavorite.status, unfavorite.body], why).toEqual(refused(FORBIDDEN_ARTICLE));
          expect([comment.status, comment.body], why).toEqual(refused(FORBIDDEN_ARTICLE));
        }
      }
    }

    async function checkList(model: Run, url: string, matches: (a: ModelArticle) => boolean, viewer: number | null, recorded: Set<string>) {
      const t0 = Date.now();
      const response = await get(model, url, viewer);
      const t1 = Date.now();
      const why = context(model, `${url} as ${viewer}: ${JSON.stringify(response.body)}`);
      expect(response.status, why).toBe(200);
      const items: Array<Record<string, any>> = response.body.articles;
      const shown = new Set(items.map((item) => item.slug));
      // What the viewer screens is out of their lists, and of their counts.
      for (const article of model.articles.filter((a) => matches(a) && screens(model, viewer, a.author))) {
        expect(shown.has(article.slug), `${article.slug} by a screened author leaked into ${why}`).toBe(false);
      }
      const candidates = model.articles.filter((a) => matches(a) && !screens(model, viewer, a.author));
      for (const article of candidates) {
        const seen = seenBetween(article, t0, t1);
        if (seen === 'yes') expect(shown.has(article.slug), `${article.slug} missing from ${why}`).toBe(true);
        if (seen === 'no') expect(shown.has(article.slug), `${article.slug} leaked into ${why}`).toBe(false);
      }
      const bySlug = new Map(candidates.map((a) => [a.slug, a]));
      for (const item of items) {
        const article = bySlug.get(item.slug);
        expect(article, `${item.slug} does not belong in ${why}`).toBeDefined();
        expect(item.status, why).toBe('published');
        expect(item.favorited, why).toBe(viewer !== null && article!.favoritedBy.has(viewer));
        expect(item.author.following, why).toBe(follows(model, viewer, article!.author));
      }
      // Newest first by publishedAt (a search ranks by relevance instead). Known exception, left out: an article published before and now scheduled again
      // sorts by its publishAt until a scheduler records the publication, then by its first publishedAt.
      const ordered = items
        .filter((item) => !(bySlug.get(item.slug)!.status === 'scheduled' && bySlug.get(item.slug)!.publishedAt !== null))
        .map((item) => Date.parse(item.publishedAt));
      if (!url.includes('q=')) expect(ordered, why).toEqual([...ordered].sort((a, b) => b - a));
      // The counts kept by triggers follow recorded publications; counted ones follow the read rule: either lies
      // between the recorded matches and those public by the end of the request.
      const live = candidates.filter((a) => !a.deleted);
      const least = live.filter((a) => recorded.has(a.slug)).length;
      const most = live.filter(
        (a) => a.hiddenReason === null && (a.status === 'published' || (a.status === 'scheduled' && a.publishAt! <= t1)),
      ).length;
      expect(response.body.articlesCount, `articlesCount of ${why}`).toBeGreaterThanOrEqual(least);
      expect(response.body.articlesCount, `articlesCount of ${why}`).toBeLessThanOrEqual(most);
    }

    /** A tag on public articles is listed; one on non-public articles only is not; one on due ones only may be. */
    async function checkTags(model: Run, recorded: Set<string>) {
      const t0 = Date.now();
      const { body } = await get(model, '/api/tags', null);
      const t1 = Date.now();
      for (const [i, tag] of model.tags.entries()) {
        const tagged = model.articles.filter((a) => !a.deleted && a.tags.includes(i));
        const why = context(model, `tag ${tag} in ${JSON.stringify(body.tags)}`);
        if (tagged.some((a) => recorded.has(a.slug) && seenBetween(a, t0, t1) === 'yes')) expect(body.tags, why).toContain(tag);
        if (tagged.every((a) => seenBetween(a, t0, t1) === 'no')) expect(body.tags, why).not.toContain(tag);
      }
    }

    /**
     * The site's, each author's and each tag's feed document, in one format a step (they share their query). A tag's
     * feed exists while a public article carries the tag: one only non-public articles carry is as unknown as one
     * nobody used (404).
     */
    async function checkFeedDocuments(model: Run, stepIndex: number) {
      const format = FEED_FORMATS[stepIndex % FEED_FORMATS.length];
      const scopes: Array<[string, (a: ModelArticle) => boolean, boolean]> = [['/feeds/articles', () => true, true]];
      for (const [i, u] of model.users.entries()) scopes.push([`/feeds/authors/${u.username}/articles`, (a) => a.author === i, true]);
      for (const [i, tag] of model.tags.entries()) scopes.push([`/feeds/tags/${tag}/articles`, (a) => a.tags.includes(i), false]);
      for (const [path, inScope, alwaysThere] of scopes) {
        const t0 = Date.now();
        const response = await app().inject({ method: 'GET', url: `${path}.${format}` });
        const t1 = Date.now();
        const why = context(model, `${path}.${format}`);
        const seenInScope = model.articles.filter(inScope).map((article) => seenBetween(article, t0, t1));
        if (alwaysThere || seenInScope.includes('yes')) expect(response.statusCode, why).toBe(200);
        else if (seenInScope.every((seen) => seen === 'no')) expect(response.statusCode, why).toBe(404);
        else expect([200, 404], why).toContain(response.statusCode);
        for (const article of model.articles) {
          const seen = inScope(article) ? seenBetween(article, t0, t1) : 'no';
          if (seen === 'yes') expect(response.body, `${article.slug} missing from ${why}`).toContain(article.slug);
          if (seen === 'no') {
            for (const text of [article.slug, article.title, article.word])
              expect(response.body, `${text} leaked into ${why}`).not.toContain(text);
          }
        }
      }
    }
  },
  SETTINGS,
);

/**
 * Every GET operation the API documents, asked by a stranger (anonymous, then signed in) with its path parameters
 * and filters naming content that is not public: a draft, a scheduled article, an unpublished one (each with a tag
 * of its own, a comment and its author's favorite). No answer may carry their titles, slugs or bodies, and the
 * single-article routes answer 404.
 */
describeEachDatabase(
  'the documented GET routes and content that is not public',
  (ctx) => {
    const app = () => ctx().app;

    it('never show a stranger a draft, a scheduled or an unpublished article', async () => {
      const author = await registerUser(app(), 'hider');
      const stranger = await registerUser(app(), 'stranger');
      const hidden: Array<{ slug: string; title: string; word: string; tag: string; commentId: number }> = [];
      const starts: Array<Record<string, unknown>> = [{ status: 'draft' }, { publishAt: iso(Date.now() + FAR_MS) }, {}];
      for (const start of starts) {
        const secret = word();
        const tag = unique('hidden');
        const title = `Secret${word()}`;
        const created = await call(app(), 'POST', '/api/articles', {
          token: author.token,
          body: { article: { title, description: `About ${secret}`, body: `Body ${secret}`, tagList: [tag], ...start } },
        });
        expect(created.status).toBe(201);
        const { slug } = created.body.article;
        const comment = await call(app(), 'POST', `/api/articles/${slug}/comments`, {
          token: author.token,
          body: { comment: { body: `Comment ${secret}` } },
        });
        expect(comment.status).toBe(201);
        expect((await call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: author.token })).status).toBe(200);
        // The third was public a moment: its creation, comment and favorite happened while anyone could see it.
        if (Object.keys(start).length === 0) {
          expect(
            (await call(app(), 'PUT', `/api/articles/${slug}`, { token: author.token, body: { article: { status: 'unpublished' } } }))
              .status,
          ).toBe(200);
        }
        hidden.push({ slug, title, word: secret, tag, commentId: comment.body.comment.id });
      }
      const hook = await call(app(), 'POST', '/api/webhooks', {
        token: author.token,
        body: { webhook: { url: 'http://127.0.0.1:9/hook', events: ['article.created'] } },
      });
      expect(hook.status).toBe(201);
      const firstEvent = Number(
        (
          await app()
            .db.selectFrom('events')
            .select((eb) => eb.fn.min('id').as('id'))
            .executeTakeFirstOrThrow()
        ).id,
      );

      const doc = JSON.parse((await app().inject({ method: 'GET', url: '/api/openapi.json' })).body);
      const base = doc.servers[0].url as string;
      let asked = 0;
      for (const [template, item] of Object.entries<any>(doc.paths)) {
        const operation = item.get;
        if (operation === undefined) continue;
        const prefix = (operation.servers?.[0]?.url ?? base).replace(/\/$/, '');
        const names: string[] = (operation.parameters ?? []).map((p: any) => `${p.in}:${p.name}`);
        for (const target of hidden) {
          const path = template
            .replace('{slug}', target.slug)
            .replace('{username}', author.username)
            .replace('{tag}', target.tag)
            .replace('{id}', String(hook.body.webhook.id));
          const query = new URLSearchParams();
          if (names.includes('query:tag')) query.set('tag', target.tag);
          if (names.includes('query:q')) query.set('q', target.word);
          const variants = [query.toString()];
          if (names.includes('query:author')) variants.push(new URLSearchParams({ author: author.username }).toString());
          if (names.includes('query:favorited')) variants.push(new URLSearchParams({ favorited: author.username }).toString());
          if (names.includes('query:lastEventId') && target === hidden[0])
            variants.push(new URLSearchParams({ lastEventId: String(firstEvent - 1) }).toString());
          for (const search of variants) {
            const url = `${prefix}${path}${search ? `?${search}` : ''}`;
            for (const token of [undefined, stranger.token]) {
              const text = await answerText(url, token, operation);
              asked++;
              // The live stream's notice that the article went away names it (that is its point), and nothing more.
              const frames = text.body.split('\n\n');
              const departures = frames.filter((frame) => frame.includes('event: article.unpublished\n'));
              const rest = frames.filter((frame) => !departures.includes(frame)).join('\n\n');
              for (const secret of [target.slug, target.title, target.word]) {
                expect(rest, `${url} (${token ? 'signed in' : 'anonymous'}) shows ${secret}`).not.toContain(secret);
              }
              expect(departures.join(''), url).not.toContain(target.word);
              if (template.includes('{slug}')) expect(text.status, url).toBe(404);
              // The replay did come (the unpublished article's departure at least), so the check above saw it.
              if (search.includes('lastEventId') && ctx().kind === 'sqlite') expect(text.body, url).toContain('event: article.unpublished');
            }
          }
        }
      }
      expect(asked).toBeGreaterThan(50);
    }, 90_000);

    /** The answer's status and text; a stream (the live events) is read for a moment, its replay of the past included. */
    const answerText = (url: string, token: string | undefined, operation: any) =>
      injectedText(app(), url, {
        headers: token ? { authorization: `Token ${token}` } : {},
        stream: operation.responses?.['200']?.content?.['text/event-stream'] !== undefined,
        replaying: url.includes('lastEventId'),
      });
  },
  // The live streams this test opens stay open (each for a moment of reading) until the app closes.
  { ...SETTINGS, EVENT_STREAMS_PER_CLIENT: '0' },
);
