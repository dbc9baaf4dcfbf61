import { sql } from 'kysely';
import type { Executor } from '../../db/index.js';

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

/**
 * How much one account may report (appeals aside: one per decision bounds them). Reports cost moderators' time, so
 * a reporter files at most PER_HOUR an hour and keeps at most OPEN open at once; one whose reports keep being
 * dismissed (at least DISMISSED_OF of their last JUDGED decided ones) files at most WHEN_DISMISSED a day, until
 * fewer of their last JUDGED are dismissed.
 */
export const REPORT_LIMITS = { PER_HOUR: 20, OPEN: 50, JUDGED: 10, DISMISSED_OF: 5, WHEN_DISMISSED: 2 } as const;

/** The open limit lifts when moderators decide, which no clock says: come back in an hour. */
const OPEN_RETRY_MS = HOUR_MS;

/** A new report refused by REPORT_LIMITS: thrown inside its transaction, which undoes it. */
export class ReportLimitReached extends Error {
  constructor(readonly retryAfterMs: number) {
    super('report limit reached');
  }
}

/** The reporter's own reports (not appeals) filed before the one being judged. */
const reportsBefore = (trx: Executor, reporterId: number, reportId: number) =>
  trx.selectFrom('reports').where('reporter_id', '=', reporterId).where('reason', '<>', 'appeal').where('id', '<', reportId);

/**
 * Throws ReportLimitReached when the report `reportId`, just filed in `trx`, breaks a limit. Two statements, each
 * reading a bounded range of an index: the newest OPEN + JUDGED reports on (reporter_id, id), which hold the newest
 * PER_HOUR and, since at most OPEN of them are open, the last JUDGED decided ones; and the open ones, counted on the
 * partial unique index up to OPEN. The caller serializes the reporter's filings, so that concurrent ones cannot all
 * pass on one count.
 */
export async function enforceReportLimits(trx: Executor, reporterId: number, reportId: number, now: number): Promise<void> {
  const { PER_HOUR, OPEN, JUDGED, DISMISSED_OF, WHEN_DISMISSED } = REPORT_LIMITS;
  const [newest, open] = await Promise.all([
    reportsBefore(trx, reporterId, reportId)
      .select(['status', 'created_at'])
      .orderBy('id', 'desc')
      .limit(sql.lit(OPEN + JUDGED))
      .execute(),
    trx
      .selectFrom(reportsBefore(trx, reporterId, reportId).select('id').where('status', '=', 'open').limit(sql.lit(OPEN)).as('open'))
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow(),
  ]);
  const judged = newest.filter((report) => report.status !== 'open').slice(0, JUDGED);
  const dismissed = judged.filter((report) => report.status === 'dismissed').length >= DISMISSED_OF;
  // When the oldest of the last `count` reports leaves the window, one more may be filed.
  const waitFor = (count: number, windowMs: number) => {
    const oldest = newest[count - 1];
    return oldest !== undefined && oldest.created_at > now - windowMs ? oldest.created_at + windowMs - now : 0;
  };
  const retryAfterMs = Math.max(
    waitFor(PER_HOUR, HOUR_MS),
    dismissed ? waitFor(WHEN_DISMISSED, DAY_MS) : 0,
    Number(open.count) >= OPEN ? OPEN_RETRY_MS : 0,
  );
  if (retryAfterMs > 0) throw new ReportLimitReached(retryAfterMs);
}
