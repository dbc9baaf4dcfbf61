import { unprocessable } from './errors.js';
import { INTEGER_ID_MAX } from './schemas.js';

/**
 * Pages that go back in id order hand out the last id shown as an opaque cursor, so that clients pass it back as it
 * is instead of doing arithmetic on ids.
 */
const encodeIdCursor = (id: number) => Buffer.from(String(id)).toString('base64url');

/**
 * The page of `rows`, read newest first with one row more than `limit`: that extra row only says whether another page
 * follows, and the cursor to it names the last row shown.
 */
export function pageOf<Row extends { id: number }>(rows: Row[], limit: number): { page: Row[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  return { page, nextCursor: rows.length > limit ? encodeIdCursor(page.at(-1)!.id) : null };
}

/**
 * The id a cursor from `encodeIdCursor` stands for; anything else is the contract's 422. The caller names its id
 * column's PostgreSQL type: past an `integer`'s range PostgreSQL would fail the statement instead of finding nothing,
 * and a `bigint` (notifications, revisions, webhook deliveries) compares any safe integer.
 */
export function decodeIdCursor(cursor: string, idColumn: 'integer' | 'bigint'): number {
  const max = idColumn === 'integer' ? INTEGER_ID_MAX : Number.MAX_SAFE_INTEGER;
  const id = Number(Buffer.from(cursor, 'base64url').toString());
  // Node's decoder skips what is not base64url and Number() reads "1e3" or " 7": only a cursor that encodes back to
  // itself is one this server made.
  if (!Number.isSafeInteger(id) || id < 1 || id > max || encodeIdCursor(id) !== cursor) throw unprocessable('cursor', 'is invalid');
  return id;
}
