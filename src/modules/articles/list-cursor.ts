import { unprocessable } from '../../errors.js';
import { INTEGER_ID_MAX } from '../../schemas.js';

/** Where a newest-first list stopped: the last article shown, by the key lists are sorted on. */
export interface TimeCursor {
  kind: 'time';
  /** The article's listed_at (its publication) on public lists; its updated_at on the author's own list. */
  at: number;
  id: number;
}

/**
 * Where a search stopped: the number of results shown, and the newest article the first page ranked, so that
 * articles written meanwhile do not enter the ranking and push results from one page onto the next. A position,
 * not the last relevance: SQLite's BM25 weighs words by how rare they are in all articles, so every new article
 * rescales every score, while the order of the articles already ranked holds.
 */
export interface RelevanceCursor {
  kind: 'relevance';
  position: number;
  horizon: number;
}

export type ListCursor = TimeCursor | RelevanceCursor;

const fieldsOf = (cursor: ListCursor) =>
  cursor.kind === 'time' ? [cursor.at, cursor.id] : [RELEVANCE_TAG, cursor.position, cursor.horizon];

/** Opaque to clients (they pass it back as it is), plain to the server: nothing in it is secret or trusted. */
export const encodeListCursor = (cursor: ListCursor) => Buffer.from(JSON.stringify(fieldsOf(cursor))).toString('base64url');

const RELEVANCE_TAG = 'rank';

const isPositive = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 1;
// An article id is an `integer` on PostgreSQL: a larger one in a cursor would fail the statement instead of finding
// nothing. A search's position is an OFFSET, which PostgreSQL takes as a bigint.
const isArticleId = (value: unknown): value is number => isPositive(value) && value <= INTEGER_ID_MAX;

function parseFields(text: string): unknown {
  try {
    return JSON.parse(Buffer.from(text, 'base64url').toString());
  } catch {
    return undefined;
  }
}

/**
 * The cursor a previous answer handed out, of the kind this list takes; anything else is the contract's 422. Any
 * well-formed cursor is safe to follow (it only bounds a key range), so no signature is needed.
 */
export function decodeListCursor<Kind extends ListCursor['kind']>(text: string, kind: Kind): Extract<ListCursor, { kind: Kind }> {
  const fields = parseFields(text);
  let cursor: ListCursor | undefined;
  if (Array.isArray(fields) && fields.length === 2 && Number.isSafeInteger(fields[0]) && isArticleId(fields[1])) {
    cursor = { kind: 'time', at: fields[0], id: fields[1] };
  } else if (
    Array.isArray(fields) &&
    fields.length === 3 &&
    fields[0] === RELEVANCE_TAG &&
    isPositive(fields[1]) &&
    isArticleId(fields[2])
  ) {
    cursor = { kind: 'relevance', position: fields[1], horizon: fields[2] };
  }
  // Node's decoder skips characters that are not base64url: only a cursor that encodes back to itself is ours.
  if (cursor === undefined || encodeListCursor(cursor) !== text) throw unprocessable('cursor', 'is invalid');
  if (cursor.kind !== kind) throw unprocessable('cursor', kind === 'time' ? 'belongs to a search' : 'does not belong to a search');
  return cursor as Extract<ListCursor, { kind: Kind }>;
}
