import type { FastifyInstance } from 'fastify';
import type { Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { recordDuePublication } from './write.js';

/**
 * How long the scheduler sleeps at most: a schedule written by another process (or instance) is noticed within this.
 * Readers do not wait for it (an article is public from its publishAt by the read rule itself); only the
 * publication's side effects do, so they come at most this late while a server runs.
 */
export const SCHEDULER_POLL_MS = 500;
/** Publications recorded per pass; a backlog (after downtime) takes several passes back to back. */
const BATCH = 100;

/** The due scheduled articles, oldest publishAt first, off the partial index of scheduled articles. */
function dueArticles(db: Executor, now: number) {
  return db
    .selectFrom('articles')
    .select('id')
    .where('status', '=', 'scheduled')
    .where('publish_at', '<=', now)
    .orderBy('publish_at')
    .orderBy('id')
    .limit(BATCH)
    .execute();
}

function nextPublishAt(db: Executor): Promise<number | undefined> {
  return db
    .selectFrom('articles')
    .select('publish_at')
    .where('status', '=', 'scheduled')
    .orderBy('publish_at')
    .limit(1)
    .executeTakeFirst()
    .then((row) => row?.publish_at ?? undefined);
}

/**
 * Records every due publication once; how many this process recorded. Each in a transaction of its own that claims
 * the row (recordDuePublication), so any number of processes may run this at once, each publication going to one of
 * them; and since "due" has no lower bound, whatever fell due while every server was down is caught up at the next
 * start, its event saying how late.
 */
export async function publishDueArticles(db: Executor, now = Date.now()): Promise<number> {
  let recorded = 0;
  for (;;) {
    const due = await dueArticles(db, now);
    for (const { id } of due) {
      if (await inTransaction(db, (trx) => recordDuePublication(trx, id, Date.now()))) recorded++;
    }
    if (due.length < BATCH) return recorded;
  }
}

/**
 * Runs the scheduler in this process until the app closes: a pass at start, then one at the next publishAt it knows
 * of or after SCHEDULER_POLL_MS, whichever comes first. A failed pass is logged and retried at the next.
 */
export function installPublicationScheduler(app: FastifyInstance, db: Executor): void {
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let running: Promise<void> | undefined;
  const pass = async () => {
    try {
      const recorded = await publishDueArticles(db);
      if (recorded > 0) app.log.info({ recorded }, 'scheduled articles published');
      const next = await nextPublishAt(db);
      return next === undefined ? SCHEDULER_POLL_MS : Math.max(0, Math.min(SCHEDULER_POLL_MS, next - Date.now()));
    } catch (error) {
      app.log.warn({ err: error }, 'could not publish scheduled articles');
      return SCHEDULER_POLL_MS;
    }
  };
  const loop = () => {
    running = pass().then((delay) => {
      // unref: the timer alone never keeps a process alive.
      if (!closed) timer = setTimeout(loop, delay).unref();
    });
  };
  app.addHook('onReady', async () => loop());
  app.addHook('preClose', async () => {
    closed = true;
    clearTimeout(timer);
    await running;
  });
}
