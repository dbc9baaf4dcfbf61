import { asDriverError } from './constraints.js';
import type { Executor } from './index.js';

const MAX_ATTEMPTS = 5;

/** PostgreSQL may pick a transaction as a deadlock victim; running it again is the documented remedy. */
const RETRYABLE_CODES = new Set<unknown>(['40P01', '40001']);
const isRetryable = (error: unknown) => RETRYABLE_CODES.has(asDriverError(error).code);

/** Runs `work` in one transaction: all of it is written, or none of it. */
export async function inTransaction<T>(db: Executor, work: (trx: Executor) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(work);
    } catch (error) {
      if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error;
      // A short random pause, growing with each attempt, so that the same transactions do not collide again.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }
}

/** A check a write runs first inside its transaction, once the rows it judges are locked; it throws to write nothing. */
export type Precondition = (trx: Executor) => Promise<void>;
