import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { expect, it } from 'vitest';
import type { Role } from '../src/db/schema.js';
import { REPORT_LIMITS } from '../src/modules/reports/limits.js';
import type { QueueEntry } from '../src/modules/reports/schemas.js';
import { describeEachDatabase } from './support/app.js';
import { addComment, call, createArticle, registerUser, type TestUser, userIdOf } from './support/client.js';

const HOUR_MS = 60 * 60 * 1000;
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const FORBIDDEN = { errors: { moderation: ['forbidden'] } };

describeEachDatabase("reports, the moderators' queue and appeals", (ctx) => {
  const app = (): FastifyInstance => ctx().app;
  const db = () => ctx().app.db;

  /** The role route belongs to another part of moderation: the tests set roles in the table. */
  async function withRole(role: Role, prefix: string = role): Promise<TestUser> {
    const user = await registerUser(app(), prefix);
    await db().updateTable('users').set({ role }).where('username', '=', user.username).execute();
    return user;
  }

  const report = (token: string, path: string, body: unknown = { report: { reason: 'spam' } }) =>
    call(app(), 'POST', `/api/${path}/report`, { token, body });
  const queue = (token: string, query = '') => call(app(), 'GET', `/api/moderation/reports${query}`, { token });
  const decide = (token: string, id: number, verb: 'resolve' | 'dismiss', note?: string) =>
    call(app(), 'POST', `/api/moderation/reports/${id}/${verb}`, { token, body: { resolution: note === undefined ? {} : { note } } });
  const decisionsOf = (user: TestUser, query = '') => call(app(), 'GET', `/api/user/moderation${query}`, { token: user.token });
  const appeal = (user: TestUser, id: number, message: unknown = 'Please look again') =>
    call(app(), 'POST', `/api/user/moderation/${id}/appeal`, { token: user.token, body: { appeal: { message } } });

  /** Every entry of the queue with that status, following the cursor, newest first unless `sort` says otherwise. */
  async function wholeQueue(token: string, query: string) {
    const entries: Array<Static<typeof QueueEntry>> = [];
    let cursor: string | null = null;
    do {
      const response = await queue(token, `${query}&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      entries.push(...response.body.reports);
      cursor = response.body.nextCursor;
    } while (cursor !== null);
    return entries;
  }

  /** Hides or unhides the author's article through the moderation routes: the decision about the author it made. */
  async function moderate(moderator: TestUser, author: TestUser, slug: string, verb: 'hide' | 'unhide' = 'hide'): Promise<number> {
    const body = { moderation: { reason: 'Off topic' } };
    const response = await call(app(), 'POST', `/api/moderation/articles/${slug}/${verb}`, { token: moderator.token, body });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    const { id } = await db()
      .selectFrom('moderation_decisions')
      .select((eb) => eb.fn.max('id').as('id'))
      .where('subject_id', '=', await userIdOf(app(), author))
      .executeTakeFirstOrThrow();
    return id;
  }

  it('files a report on an article, a comment and a profile: 201, then 200 with the same report while it is open', async () => {
    const author = await registerUser(app(), 'author');
    const reporter = await registerUser(app(), 'reporter');
    const article = await createArticle(app(), author.token);
    const comment = await addComment(app(), author.token, article.slug);
    for (const path of [`articles/${article.slug}`, `articles/${article.slug}/comments/${comment.id}`, `profiles/${author.username}`]) {
      const first = await report(reporter.token, path, { report: { reason: 'harassment', message: 'Rude' } });
      expect(first.status, path).toBe(201);
      expect(first.body).toEqual({
        report: {
          id: expect.any(Number),
          reason: 'harassment',
          message: 'Rude',
          status: 'open',
          createdAt: expect.stringMatching(ISO_MS),
        },
      });
      const again = await report(reporter.token, path, { report: { reason: 'spam' } });
      expect(again.status, path).toBe(200);
      expect(again.body).toEqual(first.body);
    }
    // A blank message is no message.
    const blank = await report(author.token, `profiles/${reporter.username}`, { report: { reason: 'other', message: '  ' } });
    expect(blank.status).toBe(201);
    expect(blank.body.report.message).toBeNull();
  });

  it('makes one report of two filed at once, and one decision of two at once', async () => {
    const moderators = await Promise.all([withRole('moderator'), withRole('moderator')]);
    const [author, reporter] = await Promise.all([registerUser(app(), 'author'), registerUser(app(), 'reporter')]);
    const both = await Promise.all([1, 2].map(() => report(reporter.token, `profiles/${author.username}`)));
    expect(both.map((response) => response.status).sort()).toEqual([200, 201]);
    expect(both[0]!.body).toEqual(both[1]!.body);
    const id = both[0]!.body.report.id;
    const decided = await Promise.all(moderators.map((moderator, i) => decide(moderator.token, id, i === 0 ? 'resolve' : 'dismiss')));
    expect(decided.map((response) => response.status).sort()).toEqual([200, 409]);
    const reporterId = await userIdOf(app(), reporter);
    expect(await db().selectFrom('moderation_decisions').select('action').where('subject_id', '=', reporterId).execute()).toHaveLength(1);
  });

  it('keeps a reported moderator from reading, or deciding, the reports about them', async () => {
    const [reported, colleague] = await Promise.all([withRole('moderator'), withRole('moderator')]);
    const reporter = await registerUser(app(), 'reporter');
    const { id } = (await report(reporter.token, `profiles/${reported.username}`)).body.report;
    const ids = async (moderator: TestUser) => (await wholeQueue(moderator.token, '?status=open')).map((entry) => entry.id);
    expect(await ids(reported)).not.toContain(id);
    expect((await queue(reported.token, '?sort=most-reported')).body.reports.map((entry: { id: number }) => entry.id)).not.toContain(id);
    expect(await ids(colleague)).toContain(id);
    expect(await decide(reported.token, id, 'dismiss')).toMatchObject({ status: 403, body: FORBIDDEN });
  });

  it('refuses reports about yourself or your own content (422)', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const comment = await addComment(app(), author.token, article.slug);
    for (const path of [`articles/${article.slug}`, `articles/${article.slug}/comments/${comment.id}`, `profiles/${author.username}`]) {
      const response = await report(author.token, path);
      expect(response.status, path).toBe(422);
      expect(response.body).toEqual({ errors: { report: ['cannot be about yourself or your own content'] } });
    }
  });

  it('answers 404 for what the reporter cannot see', async () => {
    const author = await registerUser(app(), 'author');
    const reporter = await registerUser(app(), 'reporter');
    const draft = await call(app(), 'POST', '/api/articles', {
      token: author.token,
      body: { article: { title: 'Not yet', description: 'd', body: 'b', status: 'draft' } },
    });
    const article = await createArticle(app(), author.token);
    const hidden = await addComment(app(), author.token, article.slug);
    await db().updateTable('comments').set({ hidden_reason: 'Spam' }).where('id', '=', hidden.id).execute();
    const other = await createArticle(app(), author.token);
    const elsewhere = await addComment(app(), author.token, other.slug);
    const cases: Array<[string, string]> = [
      [`articles/${draft.body.article.slug}`, 'article'],
      ['articles/no-such-article', 'article'],
      [`articles/${article.slug}/comments/${hidden.id}`, 'comment'],
      [`articles/${article.slug}/comments/${elsewhere.id}`, 'comment'],
      ['profiles/nobody-by-this-name', 'profile'],
    ];
    for (const [path, resource] of cases) {
      const response = await report(reporter.token, path);
      expect(response.status, path).toBe(404);
      expect(response.body).toEqual({ errors: { [resource]: ['not found'] } });
    }
    // The article's author sees the hidden comments under it, and may report one.
    const theirs = await addComment(app(), reporter.token, article.slug);
    await db().updateTable('comments').set({ hidden_reason: 'Spam' }).where('id', '=', theirs.id).execute();
    expect((await report(author.token, `articles/${article.slug}/comments/${theirs.id}`)).status).toBe(201);
  });

  it('checks the body: a known reason, a message of at most 2,000 characters', async () => {
    const author = await registerUser(app(), 'author');
    const reporter = await registerUser(app(), 'reporter');
    const path = `profiles/${author.username}`;
    const bad = await report(reporter.token, path, { report: { reason: 'appeal', message: 'x'.repeat(2001) } });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors).sort()).toEqual(['message', 'reason']);
    expect(bad.body.errors.message).toEqual(['is too long (maximum is 2000 characters)']);
    expect((await report(reporter.token, path, {})).body).toEqual({ errors: { report: ["can't be blank"] } });
    expect((await report(reporter.token, path, { report: {} })).body).toEqual({ errors: { reason: ["can't be blank"] } });
    expect((await report(reporter.token, path, { report: { reason: 'spam', message: 'x'.repeat(2000) } })).status).toBe(201);
  });

  it('refuses every moderation route to a plain user, and a moderator a report about an equal or higher role (403)', async () => {
    const user = await registerUser(app(), 'plain');
    const moderator = await withRole('moderator');
    const otherModerator = await withRole('moderator');
    const admin = await withRole('admin');
    const aboutAdmin = (await report(user.token, `profiles/${admin.username}`)).body.report.id;
    const aboutModerator = (await report(user.token, `profiles/${otherModerator.username}`)).body.report.id;
    const aboutUser = (await report(moderator.token, `profiles/${user.username}`)).body.report.id;

    expect(await queue(user.token)).toMatchObject({ status: 403, body: FORBIDDEN });
    for (const verb of ['resolve', 'dismiss'] as const) {
      expect(await decide(user.token, aboutUser, verb), `user ${verb}`).toMatchObject({ status: 403, body: FORBIDDEN });
      // A plain user learns nothing, not even whether the report exists.
      expect(await decide(user.token, 2_000_000, verb)).toMatchObject({ status: 403, body: FORBIDDEN });
      for (const id of [aboutAdmin, aboutModerator]) {
        expect(await decide(moderator.token, id, verb), `moderator ${verb} ${id}`).toMatchObject({ status: 403, body: FORBIDDEN });
      }
      expect(await decide(moderator.token, 2_000_000, verb)).toMatchObject({ status: 404, body: { errors: { report: ['not found'] } } });
    }
    // An admin outranks a moderator; nobody outranks an admin.
    expect((await decide(admin.token, aboutModerator, 'dismiss')).status).toBe(200);
    expect((await decide(admin.token, aboutAdmin, 'dismiss')).status).toBe(403);
  });

  it('lists the queue by status, newest or most-reported first, a page at a time, and decides each report once', async () => {
    const moderator = await withRole('moderator');
    const reporters = await Promise.all([1, 2, 3].map(() => registerUser(app(), 'reporter')));
    const [busy, quiet] = await Promise.all([registerUser(app(), 'busy'), registerUser(app(), 'quiet')]);
    const article = await createArticle(app(), busy.token, { title: 'Reported a lot' });
    const ids: Record<string, number[]> = { busy: [], quiet: [] };
    for (const reporter of reporters) ids.busy!.push((await report(reporter.token, `articles/${article.slug}`)).body.report.id);
    ids.quiet!.push((await report(reporters[0]!.token, `profiles/${quiet.username}`)).body.report.id);
    ids.busy!.push((await report(reporters[1]!.token, `profiles/${busy.username}`)).body.report.id);

    const mine = <T extends { id: number }>(entries: T[]) => entries.filter((entry) => [...ids.busy!, ...ids.quiet!].includes(entry.id));
    const newest = mine(await wholeQueue(moderator.token, '?status=open'));
    expect(newest.map((entry) => entry.id)).toEqual([...ids.busy!, ...ids.quiet!].sort((a, b) => b - a));
    const onArticle = newest.find((entry) => entry.id === ids.busy![0]);
    expect(onArticle).toEqual({
      id: ids.busy![0],
      reason: 'spam',
      message: null,
      status: 'open',
      createdAt: expect.stringMatching(ISO_MS),
      target: { type: 'article', slug: article.slug, title: 'Reported a lot', author: busy.username },
      reporter: { username: reporters[0]!.username, bio: null, image: null, following: false },
      reportCount: 3,
      resolution: null,
      appeal: null,
    });

    const ranked = mine(await wholeQueue(moderator.token, '?sort=most-reported'));
    expect(ranked.map((entry) => [entry.target.type, entry.reportCount])).toEqual([
      ['article', 3],
      ['article', 3],
      ['article', 3],
      ['profile', 1],
      ['profile', 1],
    ]);
    expect(ranked.slice(0, 3).map((entry) => entry.id)).toEqual(ids.busy!.slice(0, 3).sort((a, b) => b - a));
    expect((await queue(moderator.token, '?status=resolved&sort=most-reported')).body).toEqual({
      errors: { sort: ['most-reported orders open reports only'] },
    });
    for (const cursor of ['bm90LWEtY3Vyc29y', Buffer.from('[1,1]').toString('base64url')]) {
      expect((await queue(moderator.token, `?cursor=${cursor}`)).status).toBe(422);
    }

    const resolved = await decide(moderator.token, ids.busy![0]!, 'resolve', 'Removed it, thanks');
    expect(resolved.status).toBe(200);
    expect(resolved.body.report).toMatchObject({
      id: ids.busy![0],
      status: 'resolved',
      resolution: { note: 'Removed it, thanks', decidedAt: expect.stringMatching(ISO_MS) },
    });
    expect((await decide(moderator.token, ids.quiet![0]!, 'dismiss')).body.report.resolution).toEqual({
      note: null,
      decidedAt: expect.any(String),
    });
    for (const verb of ['resolve', 'dismiss'] as const) {
      expect(await decide(moderator.token, ids.busy![0]!, verb)).toMatchObject({
        status: 409,
        body: { errors: { report: ['already decided'] } },
      });
    }
    expect((await decide(moderator.token, ids.busy![1]!, 'resolve', ' ')).status).toBe(422);
    expect(mine((await queue(moderator.token, '?status=resolved')).body.reports).map((entry) => entry.id)).toEqual([ids.busy![0]]);
    expect(mine((await queue(moderator.token, '?status=dismissed')).body.reports).map((entry) => entry.id)).toEqual([ids.quiet![0]]);
    expect(mine(await wholeQueue(moderator.token, '?status=open')).map((entry) => entry.id)).toEqual(
      [ids.busy![1]!, ids.busy![2]!, ids.busy![3]!].sort((a, b) => b - a),
    );

    // The reporter is told, with the note; the reported author is told nothing of it.
    const told = await call(app(), 'GET', '/api/notifications', { token: reporters[0]!.token });
    expect(told.body.notifications).toEqual([
      expect.objectContaining({ kind: 'moderation', actor: expect.objectContaining({ username: moderator.username }) }),
      expect.objectContaining({ kind: 'moderation', article: { slug: article.slug, title: article.title } }),
    ]);
    const outcomes = (await decisionsOf(reporters[0]!)).body.decisions;
    expect(outcomes).toEqual([
      expect.objectContaining({ action: 'report.dismissed', reason: null, article: null, appeal: null }),
      {
        id: expect.any(Number),
        action: 'report.resolved',
        reason: 'Removed it, thanks',
        until: null,
        createdAt: expect.stringMatching(ISO_MS),
        article: { slug: article.slug, title: article.title },
        comment: null,
        appeal: null,
      },
    ]);
    expect((await decisionsOf(busy)).body).toEqual({ decisions: [], nextCursor: null });
    // A report's outcome is not the reporter's to appeal.
    expect(await appeal(reporters[0]!, outcomes[1].id)).toMatchObject({
      status: 422,
      body: { errors: { appeal: ['a decision about your report cannot be appealed'] } },
    });
  });

  it('never shows the reported user who reported them', async () => {
    const moderator = await withRole('moderator');
    const reporter = await registerUser(app(), 'whistleblower');
    const reported = await registerUser(app(), 'reported');
    const article = await createArticle(app(), reported.token);
    const comment = await addComment(app(), reported.token, article.slug);
    const filed = [];
    for (const path of [`articles/${article.slug}`, `articles/${article.slug}/comments/${comment.id}`, `profiles/${reported.username}`]) {
      filed.push((await report(reporter.token, path, { report: { reason: 'illegal', message: `by ${reporter.username}` } })).body.report);
    }
    await decide(moderator.token, filed[0].id, 'resolve', 'Hidden');
    await decide(moderator.token, filed[2].id, 'dismiss');
    const decision = await moderate(moderator, reported, article.slug);
    expect((await appeal(reported, decision)).status).toBe(201);

    const reportedId = await userIdOf(app(), reported);
    const events = await db().selectFrom('events').selectAll().where('owner_id', '=', reportedId).execute();
    const readable = [
      (await call(app(), 'GET', '/api/notifications', { token: reported.token })).body,
      (await decisionsOf(reported)).body,
      (await call(app(), 'GET', '/api/user/export', { token: reported.token })).body,
      events,
    ];
    for (const document of readable) expect(JSON.stringify(document)).not.toContain(reporter.username);
    expect(readable[1].decisions).toHaveLength(1);

    // The reporter's own export holds the reports they filed, and their outcomes.
    const exported = (await call(app(), 'GET', '/api/user/export', { token: reporter.token })).body.export;
    expect(exported.reports.map((item: { id: number }) => item.id)).toEqual(filed.map((item) => item.id));
    expect(exported.reports[0]).toEqual({
      ...filed[0],
      status: 'resolved',
      target: { type: 'article', slug: article.slug, title: article.title, author: reported.username },
      resolution: { note: 'Hidden', decidedAt: expect.any(String) },
      appeal: null,
    });
    expect(exported.reports[1].target).toEqual({
      type: 'comment',
      id: comment.id,
      body: comment.body,
      article: { slug: article.slug, title: article.title },
      author: reported.username,
    });
    expect(exported.moderation.map((item: { action: string }) => item.action)).toEqual(['report.resolved', 'report.dismissed']);
  });

  it('appeals a decision once, also while suspended, into the queue; the appellant is told the outcome', async () => {
    const moderator = await withRole('moderator');
    const author = await registerUser(app(), 'appellant');
    const stranger = await registerUser(app(), 'stranger');
    const article = await createArticle(app(), author.token);
    const decision = await moderate(moderator, author, article.slug);
    await db()
      .updateTable('users')
      .set({ suspended_at: Date.now(), suspension_reason: 'Cooling off' })
      .where('username', '=', author.username)
      .execute();
    // Suspended: no reports, but an appeal.
    expect((await report(author.token, `profiles/${stranger.username}`)).status).toBe(403);

    expect((await appeal(author, decision, '')).body).toEqual({ errors: { message: ["can't be blank"] } });
    expect((await appeal(author, decision, 'x'.repeat(2001))).status).toBe(422);
    expect(await appeal(stranger, decision)).toMatchObject({ status: 404, body: { errors: { decision: ['not found'] } } });
    const made = await appeal(author, decision, 'It was on topic');
    expect(made.status).toBe(201);
    expect(made.body).toEqual({
      decision: {
        id: decision,
        action: 'article.hidden',
        reason: 'Off topic',
        until: null,
        createdAt: expect.stringMatching(ISO_MS),
        article: { slug: article.slug, title: article.title },
        comment: null,
        appeal: { status: 'open', createdAt: expect.stringMatching(ISO_MS) },
      },
    });
    expect(await appeal(author, decision)).toMatchObject({ status: 409, body: { errors: { appeal: ['already made'] } } });

    const entry = (await queue(moderator.token)).body.reports.find(
      (item: { appeal: { decision: { id: number } } | null }) => item.appeal?.decision.id === decision,
    );
    expect(entry).toMatchObject({
      message: 'It was on topic',
      status: 'open',
      target: { type: 'article', slug: article.slug, author: author.username },
      reportCount: 1,
      appeal: { decision: { id: decision, action: 'article.hidden', reason: 'Off topic' } },
    });
    const audit = await db()
      .selectFrom('audit_log')
      .selectAll()
      .where('action', '=', 'decision.appealed')
      .where('target_id', '=', decision)
      .execute();
    expect(audit).toEqual([expect.objectContaining({ target_type: 'decision', reason: null })]);

    expect((await decide(moderator.token, entry.id, 'dismiss', 'The hide stands')).status).toBe(200);
    const [outcome, contested] = (await decisionsOf(author)).body.decisions;
    expect(outcome).toMatchObject({ action: 'report.dismissed', reason: 'The hide stands', appeal: null });
    expect(contested).toMatchObject({ id: decision, appeal: { status: 'dismissed' } });
    const auditOfDecision = await db()
      .selectFrom('audit_log')
      .select(['action', 'reason'])
      .where('target_type', '=', 'report')
      .where('target_id', '=', entry.id)
      .execute();
    expect(auditOfDecision).toEqual([{ action: 'report.dismissed', reason: 'The hide stands' }]);

    // Lifting the hide is no decision against the author.
    const lifted = await moderate(moderator, author, article.slug, 'unhide');
    expect(await appeal(author, lifted)).toMatchObject({
      status: 422,
      body: { errors: { appeal: ['a decision in your favour cannot be appealed'] } },
    });
    // Two appeals at once: one is made.
    const other = await moderate(moderator, author, article.slug, 'hide');
    const atOnce = await Promise.all([appeal(author, other), appeal(author, other)]);
    expect(atOnce.map((response) => response.status).sort()).toEqual([201, 409]);
  });

  it('pages the decisions about the caller newest first', async () => {
    const moderator = await withRole('moderator');
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const made: number[] = [];
    for (let i = 0; i < 5; i++) made.push(await moderate(moderator, author, article.slug, i % 2 === 0 ? 'hide' : 'unhide'));
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const response = await decisionsOf(author, `?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(response.status).toBe(200);
      seen.push(...response.body.decisions.map((item: { id: number }) => item.id));
      cursor = response.body.nextCursor;
    } while (cursor !== null);
    expect(seen).toEqual(made.reverse());
    expect((await decisionsOf(author, `?cursor=${Buffer.from('99999999999').toString('base64url')}`)).status).toBe(422);
  });

  it(`bounds each reporter: ${REPORT_LIMITS.PER_HOUR} an hour, ${REPORT_LIMITS.OPEN} open, and fewer once their reports keep being dismissed`, async () => {
    const target = await registerUser(app(), 'target');
    const targetId = await userIdOf(app(), target);
    /** Earlier reports of the reporter's, on made-up targets: as many as the limits need, without filing each. */
    const earlier = async (reporter: TestUser, reports: Array<{ status: 'open' | 'resolved' | 'dismissed'; ago: number }>) => {
      const reporterId = await userIdOf(app(), reporter);
      await db()
        .insertInto('reports')
        .values(
          reports.map(({ status, ago }, i) => ({
            reporter_id: reporterId,
            target_type: 'profile' as const,
            subject_id: targetId,
            target_key: `profile:${1_000_000 + i}`,
            reason: 'spam',
            status,
            created_at: Date.now() - ago,
          })),
        )
        .execute();
    };
    const refused = async (reporter: TestUser, retryAtLeast: number, retryAtMost: number, on = target) => {
      const response = await report(reporter.token, `profiles/${on.username}`);
      expect(response.status).toBe(429);
      expect(response.body).toEqual({ errors: { rate: ['limit exceeded'] } });
      const retry = Number(response.headers['retry-after']);
      expect(retry).toBeGreaterThanOrEqual(retryAtLeast);
      expect(retry).toBeLessThanOrEqual(retryAtMost);
    };

    const hasty = await registerUser(app(), 'hasty');
    await earlier(
      hasty,
      Array.from({ length: REPORT_LIMITS.PER_HOUR }, (_, i) => ({ status: 'resolved', ago: (49 - i) * 60_000 + 1000 })),
    );
    // The oldest of the last twenty leaves the hour in about 11 minutes.
    await refused(hasty, 10 * 60, 11 * 60);

    const hoarder = await registerUser(app(), 'hoarder');
    await earlier(
      hoarder,
      Array.from({ length: REPORT_LIMITS.OPEN }, () => ({ status: 'open', ago: 2 * HOUR_MS })),
    );
    await refused(hoarder, 3600, 3600);

    const dismissedOften = await registerUser(app(), 'dismissed');
    await earlier(dismissedOften, [
      ...Array.from({ length: 5 }, () => ({ status: 'dismissed' as const, ago: 3 * 24 * HOUR_MS })),
      ...Array.from({ length: 5 }, () => ({ status: 'resolved' as const, ago: 2 * 24 * HOUR_MS })),
      { status: 'open', ago: 3 * HOUR_MS },
    ]);
    expect((await report(dismissedOften.token, `profiles/${target.username}`)).status).toBe(201);
    const another = await registerUser(app(), 'another');
    await refused(dismissedOften, 20 * 3600, 21 * 3600, another);
    // Nothing was kept of the refused report, which would otherwise be answered 200 now.
    await refused(dismissedOften, 20 * 3600, 21 * 3600, another);

    // Mostly upheld: four dismissed of the last ten is no throttle.
    const fine = await registerUser(app(), 'fine');
    await earlier(fine, [
      ...Array.from({ length: 4 }, () => ({ status: 'dismissed' as const, ago: 3 * 24 * HOUR_MS })),
      ...Array.from({ length: 6 }, () => ({ status: 'resolved' as const, ago: 2 * 24 * HOUR_MS })),
      { status: 'open', ago: 3 * HOUR_MS },
      { status: 'open', ago: 2 * HOUR_MS },
    ]);
    expect((await report(fine.token, `profiles/${target.username}`)).status).toBe(201);
  });
});
