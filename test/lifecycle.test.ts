import { expect, it, vi } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, registerUser, type TestUser, unique, userIdOf } from './support/client.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DAY_MS = 24 * 60 * 60 * 1000;
const STATES = ['draft', 'scheduled', 'published', 'unpublished'] as const;
type State = (typeof STATES)[number];

/** The contract's transitions, besides staying in the same state. */
const ALLOWED: Record<State, State[]> = {
  draft: ['scheduled', 'published'],
  scheduled: ['draft', 'published', 'scheduled'],
  published: ['unpublished'],
  unpublished: ['published', 'scheduled', 'draft'],
};

const inFuture = (ms: number) => new Date(Date.now() + ms).toISOString();

describeEachDatabase(
  'article lifecycle',
  (ctx) => {
    const app = () => ctx().app;
    const db = () => ctx().app.db;

    const create = (token: string, fields: Record<string, unknown> = {}) =>
      call(app(), 'POST', '/api/articles', {
        token,
        body: { article: { title: unique('Lifecycle '), description: 'About it', body: 'The body', ...fields } },
      });
    const update = (token: string, slug: string, fields: Record<string, unknown>) =>
      call(app(), 'PUT', `/api/articles/${slug}`, { token, body: { article: fields } });
    const read = (slug: string, token?: string) => call(app(), 'GET', `/api/articles/${slug}`, { token });
    const own = (token: string | undefined, query = '') => call(app(), 'GET', `/api/user/articles${query}`, { token });

    /** An article of `author` in `state`, reached by the API alone; scheduled ones an hour ahead. */
    async function articleIn(author: TestUser, state: State) {
      const fields = state === 'unpublished' ? {} : state === 'scheduled' ? { publishAt: inFuture(3_600_000) } : { status: state };
      const created = await create(author.token, fields);
      expect(created.status).toBe(201);
      if (state !== 'unpublished') return created.body.article;
      const unpublished = await update(author.token, created.body.article.slug, { status: 'unpublished' });
      expect(unpublished.status).toBe(200);
      return unpublished.body.article;
    }

    const lastEventId = async () =>
      Number(
        (
          await db()
            .selectFrom('events')
            .select((eb) => eb.fn.max('id').as('id'))
            .executeTakeFirst()
        )?.id ?? 0,
      );

    /** The events of one article written after `afterId`, oldest first, `data` parsed. */
    async function articleEvents(slug: string, afterId = 0) {
      const rows = await db()
        .selectFrom('events')
        .innerJoin('articles', 'articles.id', 'events.article_id')
        .select(['events.id', 'events.type', 'events.public', 'events.data', 'events.owner_id'])
        .where('articles.slug', '=', slug)
        .where('events.id', '>', afterId)
        .orderBy('events.id')
        .execute();
      return rows.map((row) => ({ ...row, data: JSON.parse(row.data) }));
    }

    it('creates a published article without status or publishAt, publishedAt its creation', async () => {
      const author = await registerUser(app(), 'author');
      for (const fields of [{}, { status: 'published' }, { status: 'published', publishAt: null }]) {
        const response = await create(author.token, fields);
        expect(response.status).toBe(201);
        const { article } = response.body;
        expect(article).toMatchObject({ status: 'published', publishAt: null, publishedAt: article.createdAt });
        expect((await read(article.slug)).body.article).toEqual({ ...article, favorited: false });
      }
    });

    it('creates a draft visible to its author alone', async () => {
      const author = await registerUser(app(), 'author');
      const stranger = await registerUser(app(), 'stranger');
      const response = await create(author.token, { status: 'draft' });
      expect(response.status).toBe(201);
      const { article } = response.body;
      expect(article).toMatchObject({ status: 'draft', publishAt: null, publishedAt: null });
      expect((await read(article.slug, author.token)).body.article).toEqual(article);
      expect(await read(article.slug)).toMatchObject({ status: 404, body: { errors: { article: ['not found'] } } });
      expect((await read(article.slug, stranger.token)).status).toBe(404);
    });

    it('creates a scheduled article from publishAt alone or with status scheduled', async () => {
      const author = await registerUser(app(), 'author');
      const when = Date.now() + 3_600_000;
      // Any ISO offset is accepted; the answer gives the instant in UTC with milliseconds.
      const withOffset = new Date(when).toISOString().replace('Z', '+00:00');
      for (const fields of [{ publishAt: withOffset }, { status: 'scheduled', publishAt: new Date(when).toISOString() }]) {
        const response = await create(author.token, fields);
        expect(response.status).toBe(201);
        expect(response.body.article).toMatchObject({ status: 'scheduled', publishAt: new Date(when).toISOString(), publishedAt: null });
        expect((await read(response.body.article.slug)).status).toBe(404);
      }
    });

    it('refuses a publishAt in the past, more than a year ahead, missing when scheduling, or beside another status: 422', async () => {
      const author = await registerUser(app(), 'author');
      const refusals: Array<Record<string, unknown>> = [
        { publishAt: inFuture(-60_000) },
        { status: 'scheduled', publishAt: inFuture(-1) },
        { publishAt: inFuture(400 * DAY_MS) },
        { status: 'scheduled', publishAt: inFuture(367 * DAY_MS) },
        { status: 'scheduled' },
        { status: 'scheduled', publishAt: null },
        { status: 'draft', publishAt: inFuture(3_600_000) },
        { status: 'published', publishAt: inFuture(3_600_000) },
        { publishAt: 'tomorrow' },
        { publishAt: '2030-01-01' },
      ];
      const before = await lastEventId();
      for (const fields of refusals) {
        const response = await create(author.token, fields);
        expect(response.status, JSON.stringify(fields)).toBe(422);
        expect(Object.keys(response.body.errors), JSON.stringify(fields)).toEqual(['publishAt']);
      }
      expect(await lastEventId()).toBe(before);
      expect((await own(author.token)).body.articlesCount).toBe(0);
      // Just within the year is fine.
      expect((await create(author.token, { publishAt: inFuture(360 * DAY_MS) })).status).toBe(201);
    });

    it('refuses the same publishAt mistakes on an update, leaving the article as it was', async () => {
      const author = await registerUser(app(), 'author');
      const draft = await articleIn(author, 'draft');
      for (const fields of [
        { status: 'scheduled', publishAt: inFuture(-1000) },
        { publishAt: inFuture(400 * DAY_MS) },
        { status: 'scheduled' },
        { status: 'draft', publishAt: inFuture(3_600_000) },
        { status: 'published', publishAt: inFuture(3_600_000) },
      ]) {
        const response = await update(author.token, draft.slug, fields);
        expect(response.status, JSON.stringify(fields)).toBe(422);
        expect(Object.keys(response.body.errors)).toEqual(['publishAt']);
      }
      expect((await read(draft.slug, author.token)).body.article).toEqual(draft);
    });

    for (const from of STATES) {
      for (const to of STATES) {
        const allowed = ALLOWED[from].includes(to);
        const outcome = from === to && to !== 'scheduled' ? 'is a no-op' : allowed ? 'is allowed' : 'answers 409';
        it(`${from} -> ${to} ${outcome}`, async () => {
          const author = await registerUser(app(), 'author');
          const before = await articleIn(author, from);
          const publishAt = to === 'scheduled' ? inFuture(7_200_000) : undefined;
          const eventsBefore = await lastEventId();
          const response = await update(author.token, before.slug, { status: to, ...(publishAt && { publishAt }) });
          const after = (await read(before.slug, author.token)).body.article;
          if (from === to && to !== 'scheduled') {
            expect(response.status).toBe(200);
            expect(after).toMatchObject({ status: from, publishAt: null, publishedAt: before.publishedAt });
            expect(await articleEvents(before.slug, eventsBefore)).toEqual([]);
          } else if (allowed) {
            expect(response.status).toBe(200);
            expect(response.body.article).toEqual(after);
            expect(after).toMatchObject({ status: to, publishAt: publishAt ?? null });
            // publishedAt is set by the first publication and never changes after.
            if (before.publishedAt !== null) expect(after.publishedAt).toBe(before.publishedAt);
            else if (to === 'published') expect(after.publishedAt).toMatch(ISO_MS);
            else expect(after.publishedAt).toBeNull();
            expect((await read(before.slug)).status).toBe(to === 'published' ? 200 : 404);
          } else {
            expect(response.status).toBe(409);
            expect(response.body).toEqual({ errors: { status: [`cannot change from ${from} to ${to}`] } });
            expect(after).toEqual(before);
            expect(await lastEventId()).toBe(eventsBefore);
          }
        });
      }
    }

    it('answers the contract 409 body for published -> draft word for word', async () => {
      const author = await registerUser(app(), 'author');
      const article = await articleIn(author, 'published');
      const response = await update(author.token, article.slug, { status: 'draft' });
      expect(response.status).toBe(409);
      expect(response.body).toEqual({ errors: { status: ['cannot change from published to draft'] } });
    });

    it('reschedules a scheduled article, and the same publishAt again changes nothing', async () => {
      const author = await registerUser(app(), 'author');
      const article = await articleIn(author, 'scheduled');
      const later = inFuture(10_800_000);
      const moved = await update(author.token, article.slug, { publishAt: later });
      expect(moved.status).toBe(200);
      expect(moved.body.article).toMatchObject({ status: 'scheduled', publishAt: later, publishedAt: null });
      const eventsBefore = await lastEventId();
      const again = await update(author.token, article.slug, { status: 'scheduled', publishAt: later });
      expect(again.status).toBe(200);
      expect(again.body.article).toMatchObject({ status: 'scheduled', publishAt: later });
      expect(await lastEventId()).toBe(eventsBefore);
      // A scheduled article must keep a time: clearing it alone is refused.
      expect((await update(author.token, article.slug, { publishAt: null })).status).toBe(422);
    });

    it('keeps publishedAt once set, through unpublishing, republishing, drafts and a later schedule', async () => {
      const author = await registerUser(app(), 'author');
      const draft = await articleIn(author, 'draft');
      const published = (await update(author.token, draft.slug, { status: 'published' })).body.article;
      const first = published.publishedAt;
      expect(first).toMatch(ISO_MS);
      expect(Date.parse(first)).toBeGreaterThan(Date.parse(draft.createdAt));
      const steps: Array<Record<string, unknown>> = [
        { status: 'unpublished' },
        { status: 'published' },
        { status: 'unpublished' },
        { status: 'draft' },
        { status: 'scheduled', publishAt: inFuture(3_600_000) },
        { status: 'draft' },
        { status: 'published' },
      ];
      for (const step of steps) {
        const response = await update(author.token, draft.slug, step);
        expect(response.status, JSON.stringify(step)).toBe(200);
        expect(response.body.article.publishedAt).toBe(first);
      }
      // Republished after a schedule too: its publication is still the first one.
      await update(author.token, draft.slug, { status: 'unpublished' });
      const soon = inFuture(300);
      expect((await update(author.token, draft.slug, { publishAt: soon })).body.article.publishedAt).toBe(first);
      await vi.waitFor(async () => expect((await read(draft.slug)).status).toBe(200), { timeout: 3000, interval: 25 });
      // Published from the draft, republished twice by hand, then by the scheduler.
      await vi.waitFor(
        async () => expect((await articleEvents(draft.slug)).filter((event) => event.type === 'article.published')).toHaveLength(4),
        { timeout: 3000, interval: 25 },
      );
      expect((await read(draft.slug)).body.article).toMatchObject({ status: 'published', publishAt: null, publishedAt: first });
    });

    it('publishes a scheduled article at its publishAt: readers see it from then on, publishedAt is that time', async () => {
      const author = await registerUser(app(), 'author');
      const publishAt = inFuture(400);
      const { article } = (await create(author.token, { publishAt, tagList: [unique('soon')] })).body;
      expect((await read(article.slug)).status).toBe(404);
      await vi.waitFor(async () => expect((await read(article.slug)).status).toBe(200), { timeout: 3000, interval: 10 });
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(publishAt));
      const seen = (await read(article.slug)).body.article;
      expect(seen).toMatchObject({ status: 'published', publishAt: null, publishedAt: publishAt });
      // Once the scheduler has recorded it, the stored row says the same.
      await vi.waitFor(
        async () =>
          expect(
            await db().selectFrom('articles').select(['status', 'published_at']).where('slug', '=', article.slug).executeTakeFirst(),
          ).toEqual({ status: 'published', published_at: Date.parse(publishAt) }),
        { timeout: 3000, interval: 25 },
      );
      expect((await read(article.slug)).body.article).toEqual(seen);
    });

    it('judges a transition on the state readers see: a scheduled article past its time is published', async () => {
      const author = await registerUser(app(), 'author');
      const publishAt = inFuture(150);
      const { article } = (await create(author.token, { publishAt })).body;
      await vi.waitFor(async () => expect((await read(article.slug)).status).toBe(200), { timeout: 3000, interval: 10 });
      // Whether or not the scheduler got there first, it is published: draft is no longer reachable from it.
      const refused = await update(author.token, article.slug, { status: 'draft' });
      expect(refused).toMatchObject({ status: 409, body: { errors: { status: ['cannot change from published to draft'] } } });
      const unpublished = await update(author.token, article.slug, { status: 'unpublished' });
      expect(unpublished.status).toBe(200);
      expect(unpublished.body.article).toMatchObject({ status: 'unpublished', publishedAt: publishAt });
      const published = (await articleEvents(article.slug)).filter((event) => event.type === 'article.published');
      expect(published).toHaveLength(1);
      expect(published[0]!.data.scheduledFor).toBe(publishAt);
    });

    it('lists public articles newest first by publishedAt, not by creation', async () => {
      const author = await registerUser(app(), 'author');
      const tag = unique('order');
      const drafted = await articleIn(author, 'draft');
      await update(author.token, drafted.slug, { tagList: [tag] });
      const direct = (await create(author.token, { tagList: [tag] })).body.article;
      const laterPublished = (await update(author.token, drafted.slug, { status: 'published' })).body.article;
      expect(Date.parse(laterPublished.publishedAt)).toBeGreaterThan(Date.parse(direct.publishedAt));
      for (const url of [`/api/articles?author=${author.username}`, `/api/articles?tag=${tag}`]) {
        expect(
          (await call(app(), 'GET', url)).body.articles.map((a: { slug: string }) => a.slug),
          url,
        ).toEqual([drafted.slug, direct.slug]);
      }
      // Unpublished and published again, it goes back to its first publication's place.
      await update(author.token, drafted.slug, { status: 'unpublished' });
      expect((await call(app(), 'GET', `/api/articles?tag=${tag}`)).body).toMatchObject({
        articlesCount: 1,
        articles: [{ slug: direct.slug }],
      });
      await update(author.token, drafted.slug, { status: 'published' });
      expect((await call(app(), 'GET', `/api/articles?tag=${tag}`)).body.articles.map((a: { slug: string }) => a.slug)).toEqual([
        drafted.slug,
        direct.slug,
      ]);
    });

    it('GET /api/user/articles needs a token', async () => {
      expect(await own(undefined)).toMatchObject({ status: 401, body: { errors: { token: expect.any(Array) } } });
    });

    it("GET /api/user/articles lists the caller's articles in every state, newest change first, filtered by status", async () => {
      const author = await registerUser(app(), 'author');
      const other = await registerUser(app(), 'other');
      await articleIn(other, 'draft');
      await articleIn(other, 'published');
      const made: Array<{ slug: string; status: State }> = [];
      for (const state of ['draft', 'published', 'scheduled', 'unpublished', 'draft', 'published', 'scheduled'] as const) {
        made.push({ slug: (await articleIn(author, state)).slug, status: state });
      }
      // An edit is a change: the oldest draft moves to the front.
      await update(author.token, made[0]!.slug, { body: 'Edited' });
      const newestChangeFirst = [made[0]!, ...made.slice(1).reverse()];

      const all = await own(author.token);
      expect(all.status).toBe(200);
      expect(all.body).toEqual({ articles: expect.any(Array), articlesCount: made.length, nextCursor: null });
      expect(all.body.articles.map((a: { slug: string }) => a.slug)).toEqual(newestChangeFirst.map((a) => a.slug));
      expect(all.body.articles.map((a: { status: string }) => a.status)).toEqual(newestChangeFirst.map((a) => a.status));
      const times = all.body.articles.map((a: { updatedAt: string }) => Date.parse(a.updatedAt));
      expect(times).toEqual([...times].sort((a, b) => b - a));
      expect(all.body.articles[0]).not.toHaveProperty('body');

      for (const status of STATES) {
        const filtered = await own(author.token, `?status=${status}`);
        const expected = newestChangeFirst.filter((a) => a.status === status).map((a) => a.slug);
        expect(
          filtered.body.articles.map((a: { slug: string }) => a.slug),
          status,
        ).toEqual(expected);
        expect(filtered.body.articlesCount).toBe(expected.length);
      }
      expect((await own(author.token, '?status=deleted')).status).toBe(422);

      // limit and offset
      const page = await own(author.token, '?limit=3&offset=2');
      expect(page.body.articles.map((a: { slug: string }) => a.slug)).toEqual(newestChangeFirst.slice(2, 5).map((a) => a.slug));
      expect(page.body.articlesCount).toBe(made.length);

      // cursor: every article exactly once, in order
      const walked: string[] = [];
      let cursor: string | null = null;
      do {
        const response = await own(author.token, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(response.status).toBe(200);
        walked.push(...response.body.articles.map((a: { slug: string }) => a.slug));
        cursor = response.body.nextCursor;
      } while (cursor !== null && walked.length <= made.length);
      expect(walked).toEqual(newestChangeFirst.map((a) => a.slug));
      const scheduledPage = await own(author.token, '?status=scheduled&limit=1');
      const next = await own(author.token, `?status=scheduled&limit=1&cursor=${encodeURIComponent(scheduledPage.body.nextCursor)}`);
      expect([...scheduledPage.body.articles, ...next.body.articles].map((a: { slug: string }) => a.slug)).toEqual(
        newestChangeFirst.filter((a) => a.status === 'scheduled').map((a) => a.slug),
      );
      expect(next.body.nextCursor).toBeNull();
      expect((await own(author.token, `?offset=1&cursor=${encodeURIComponent(scheduledPage.body.nextCursor)}`)).status).toBe(422);
    });

    it('GET /api/user/articles files a scheduled article whose time has come under published', async () => {
      const author = await registerUser(app(), 'author');
      const { article } = (await create(author.token, { publishAt: inFuture(200) })).body;
      expect((await own(author.token, '?status=scheduled')).body.articles.map((a: { slug: string }) => a.slug)).toEqual([article.slug]);
      await vi.waitFor(async () => expect((await read(article.slug)).status).toBe(200), { timeout: 3000, interval: 10 });
      expect((await own(author.token, '?status=scheduled')).body).toMatchObject({ articles: [], articlesCount: 0 });
      expect((await own(author.token, '?status=published')).body).toMatchObject({
        articles: [{ slug: article.slug, status: 'published' }],
        articlesCount: 1,
      });
    });

    it("records a draft's creation off the public stream, where the owner's webhooks still get it", async () => {
      const author = await registerUser(app(), 'author');
      const hook = await call(app(), 'POST', '/api/webhooks', {
        token: author.token,
        body: { webhook: { url: 'http://127.0.0.1:9/hook', events: ['article.created', 'article.published', 'article.unpublished'] } },
      });
      expect(hook.status).toBe(201);
      const draft = await articleIn(author, 'draft');
      const [created, ...rest] = await articleEvents(draft.slug);
      expect(rest).toEqual([]);
      expect(created).toMatchObject({ type: 'article.created', public: 0, owner_id: await userIdOf(app(), author) });
      expect(created!.data.article).toMatchObject({ slug: draft.slug, status: 'draft' });
      const deliveries = await db().selectFrom('webhook_deliveries').select('event_id').where('event_id', '=', created!.id).execute();
      expect(deliveries).toHaveLength(1);

      // An article public at once is on the public stream.
      const published = await articleIn(author, 'published');
      expect(await articleEvents(published.slug)).toMatchObject([{ type: 'article.created', public: 1 }]);
    });

    it('records article.published when a draft is published and article.unpublished when it is taken back', async () => {
      const author = await registerUser(app(), 'author');
      const draft = await articleIn(author, 'draft');
      const afterCreate = await lastEventId();
      const published = (await update(author.token, draft.slug, { status: 'published' })).body.article;
      const afterPublish = await articleEvents(draft.slug, afterCreate);
      expect(afterPublish).toMatchObject([{ type: 'article.published', public: 1 }]);
      expect(afterPublish[0]!.data.article).toMatchObject({ slug: draft.slug, status: 'published', publishedAt: published.publishedAt });

      const afterPublishId = await lastEventId();
      expect((await update(author.token, draft.slug, { status: 'unpublished' })).status).toBe(200);
      const afterUnpublish = await articleEvents(draft.slug, afterPublishId);
      expect(afterUnpublish).toMatchObject([{ type: 'article.unpublished', public: 1 }]);
      // Only what a reader needs to drop it: not its body.
      expect(afterUnpublish[0]!.data).toEqual({ article: { slug: draft.slug, title: draft.title } });

      // Edits of an unpublished article stay off the public stream.
      const afterUnpublishId = await lastEventId();
      await update(author.token, draft.slug, { body: unique('secret body ') });
      expect(await articleEvents(draft.slug, afterUnpublishId)).toMatchObject([{ type: 'article.updated', public: 0 }]);
    });

    it('records one article.published for a scheduled publication, with scheduledFor and lateByMs', async () => {
      const author = await registerUser(app(), 'author');
      const publishAt = inFuture(300);
      const { article } = (await create(author.token, { publishAt })).body;
      expect(await articleEvents(article.slug)).toMatchObject([{ type: 'article.created', public: 0 }]);
      await vi.waitFor(async () => expect((await articleEvents(article.slug)).length).toBe(2), { timeout: 3000, interval: 25 });
      const [, event] = await articleEvents(article.slug);
      expect(event).toMatchObject({ type: 'article.published', public: 1 });
      expect(event!.data).toMatchObject({
        article: { slug: article.slug, status: 'published', publishedAt: publishAt },
        scheduledFor: publishAt,
        lateByMs: expect.any(Number),
      });
      expect(event!.data.lateByMs).toBeGreaterThanOrEqual(0);
      // The scheduler polls at most every 500 ms; here it knew the time in advance.
      expect(event!.data.lateByMs).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(await articleEvents(article.slug)).toHaveLength(2);
    });
  },
  { WEBHOOKS_DELIVERY: 'off', WEBHOOK_ALLOW_LOOPBACK: 'true' },
);

/**
 * With no scheduler running, a due publication stays unrecorded as long as the test likes: what every reader sees in
 * the moments before a scheduler gets to it (up to its poll interval, or the whole downtime after every server was
 * down), made to last.
 */
describeEachDatabase(
  'a scheduled article whose time has come, before any scheduler records it',
  (ctx) => {
    const app = () => ctx().app;
    const get = (url: string, token?: string) => call(app(), 'GET', url, { token });
    const slugsOf = (response: { body: { articles: Array<{ slug: string }> } }) => response.body.articles.map((a) => a.slug);

    /** Schedules an article `ms` ahead and waits until it is due. */
    async function due(author: TestUser, fields: Record<string, unknown>, ms = 150) {
      const publishAt = new Date(Date.now() + ms).toISOString();
      const response = await call(app(), 'POST', '/api/articles', {
        token: author.token,
        body: { article: { title: unique('Due '), description: 'Soon', body: 'Body', ...fields, publishAt } },
      });
      expect(response.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, Date.parse(publishAt) - Date.now() + 20));
      return { ...response.body.article, publishAt } as { slug: string; title: string; publishAt: string };
    }

    it('is in every list, search, feed and feed document, and takes comments and favorites', async () => {
      const author = await registerUser(app(), 'author');
      const reader = await registerUser(app(), 'reader');
      await call(app(), 'POST', `/api/profiles/${author.username}/follow`, { token: reader.token });
      const tag = unique('due');
      const word = unique('dueword');
      const article = await due(author, { tagList: [tag], body: `A ${word} body` });
      expect((await get(`/api/articles/${article.slug}`)).body.article).toMatchObject({
        status: 'published',
        publishAt: null,
        publishedAt: article.publishAt,
      });
      expect((await get(`/api/articles/${article.slug}/comments`)).status).toBe(200);
      expect((await call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: reader.token })).status).toBe(200);
      expect(
        (await call(app(), 'POST', `/api/articles/${article.slug}/comments`, { token: reader.token, body: { comment: { body: 'Hi' } } }))
          .status,
      ).toBe(201);
      for (const url of [
        '/api/articles',
        `/api/articles?author=${author.username}`,
        `/api/articles?tag=${tag}`,
        `/api/articles?favorited=${reader.username}`,
        `/api/articles?tag=${tag}&author=${author.username}`,
        `/api/articles?q=${word}`,
      ]) {
        const listed = await get(url);
        expect(listed.status, JSON.stringify(listed.body)).toBe(200);
        expect(slugsOf(listed), url).toEqual([article.slug]);
      }
      expect(slugsOf(await get('/api/articles/feed', reader.token))).toEqual([article.slug]);
      for (const path of ['/feeds/articles', `/feeds/tags/${tag}/articles`, `/feeds/authors/${author.username}/articles`]) {
        const feed = JSON.parse((await app().inject({ method: 'GET', url: `${path}.json` })).body);
        expect(feed.items, path).toHaveLength(1);
        expect(feed.items[0].url, path).toContain(article.slug);
        // Dated with its publication, as the article answers say.
        expect(Date.parse(feed.items[0].date_published), path).toBe(Date.parse(article.publishAt));
      }
      // Still unrecorded: all of the above came from the read rule alone.
      expect((await get(`/api/user/articles?status=published`, author.token)).body.articles[0]).toMatchObject({ status: 'published' });
      const row = await app().db.selectFrom('articles').select('status').where('slug', '=', article.slug).executeTakeFirstOrThrow();
      expect(row.status).toBe('scheduled');
    });

    it("a feed document's Last-Modified is not older than the publication it now shows", async () => {
      const author = await registerUser(app(), 'author');
      const article = await due(author, {}, 1200);
      const response = await app().inject({ method: 'GET', url: `/feeds/authors/${author.username}/articles.json` });
      expect(JSON.parse(response.body).items[0].url).toContain(article.slug);
      const lastModified = response.headers['last-modified'];
      // Last-Modified has whole seconds: the second of the publication at least.
      if (lastModified !== undefined) {
        expect(Date.parse(String(lastModified))).toBeGreaterThanOrEqual(Math.floor(Date.parse(article.publishAt) / 1000) * 1000);
      }
      const revalidated = await app().inject({
        method: 'GET',
        url: `/feeds/authors/${author.username}/articles.json`,
        headers: { 'if-modified-since': new Date(Date.parse(article.publishAt) - 1000).toUTCString() },
      });
      expect(revalidated.statusCode).toBe(200);
    });
  },
  { SCHEDULED_PUBLISHING: 'off' },
);
