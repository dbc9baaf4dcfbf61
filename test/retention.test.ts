import { expect, it } from 'vitest';
import { purgeOldEvents, purgeReadNotifications } from '../src/modules/events/retention.js';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser } from './support/client.js';

const DAY = 86_400_000;

describeEachDatabase('retention', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  /** Ages every event and notification by `days`. */
  async function age(days: number) {
    await db()
      .updateTable('events')
      .set((eb) => ({ created_at: eb('created_at', '-', days * DAY) }))
      .execute();
    await db()
      .updateTable('notifications')
      .set((eb) => ({ created_at: eb('created_at', '-', days * DAY) }))
      .execute();
  }

  it('purges old events in batches but keeps those a pending webhook delivery still needs', async () => {
    const author = await registerUser(app(), 'author');
    const article = await createArticle(app(), author.token);
    const events = await db().selectFrom('events').select(['id', 'owner_id']).orderBy('id').execute();
    const owed = events.at(-1)!;
    const endpoint = await db()
      .insertInto('webhook_endpoints')
      .values({ owner_id: owed.owner_id!, url: 'https://example.com/hook', event_mask: 1, secret: 'whsec_x', created_at: Date.now() })
      .returning('id')
      .executeTakeFirstOrThrow();
    await db()
      .insertInto('webhook_deliveries')
      .values({ endpoint_id: endpoint.id, event_id: owed.id, status: 'pending', next_attempt_at: 0, created_at: 0 })
      .execute();
    await age(31);
    const fresh = await call(app(), 'POST', `/api/articles/${article.slug}/comments`, {
      token: author.token,
      body: { comment: { body: 'after the cut-off' } },
    });
    expect(fresh.status).toBe(201);

    const before = Date.now() - 30 * DAY;
    const removable = events.length - 1;
    let deleted = 0;
    let step: number;
    do {
      step = await purgeOldEvents(db(), before, 1);
      deleted += step;
    } while (step === 1);
    expect(deleted).toBeGreaterThanOrEqual(removable);
    const left = await db().selectFrom('events').select(['id', 'type']).execute();
    expect(left.map((event) => event.id)).toContain(owed.id);
    expect(left.some((event) => event.type === 'comment.created')).toBe(true);
    expect(left.some((event) => events.some((old) => old.id === event.id && old.id !== owed.id))).toBe(false);
  });

  it('purges read notifications past their age and never unread ones', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const article = await createArticle(app(), author.token);
    for (const body of ['one', 'two', 'three']) {
      await call(app(), 'POST', `/api/articles/${article.slug}/comments`, { token: reader.token, body: { comment: { body } } });
    }
    const notices = await db()
      .selectFrom('notifications')
      .innerJoin('users', 'users.id', 'notifications.recipient_id')
      .select(['notifications.id', 'notifications.recipient_id'])
      .where('users.username', '=', author.username)
      .orderBy('notifications.id')
      .execute();
    expect(notices).toHaveLength(3);
    const [first, second, third] = notices as [(typeof notices)[number], (typeof notices)[number], (typeof notices)[number]];
    await db().insertInto('notification_marks').values({ user_id: first.recipient_id, read_up_to: second.id }).execute();
    await age(91);

    expect(await purgeReadNotifications(db(), Date.now() - 90 * DAY, 1000)).toBeGreaterThanOrEqual(2);
    const left = await db().selectFrom('notifications').select('id').where('recipient_id', '=', first.recipient_id).execute();
    expect(left.map((notice) => notice.id)).toEqual([third.id]);
  });
});
