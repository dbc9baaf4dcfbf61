import { type TNumberOptions, type TSchema, type TStringOptions, Type } from 'typebox';
import { FINITE_KEYWORD, MESSAGE_KEYWORD } from './plugins/validation.js';

/** A required string that may not be empty or only white space. */
export const RequiredText = (maxLength: number, description?: string) =>
  Type.String({ minLength: 1, maxLength, pattern: '\\S', [MESSAGE_KEYWORD]: "can't be blank", description });

/** An integer in a query string or path: coerced from text, so it must also be finite (`?limit=Infinity` is refused). */
export const UrlInteger = (options: TNumberOptions) => Type.Integer({ ...options, [FINITE_KEYWORD]: true });

/**
 * The largest id of the tables whose ids are PostgreSQL `integer`s (users, articles, comments, webhook endpoints):
 * PostgreSQL refuses a larger number compared with one of them (a 500), where SQLite only finds nothing.
 */
export const INTEGER_ID_MAX = 2_147_483_647;

/**
 * A query parameter that clients may leave out because validation fills in its `default` (Ajv's `useDefaults`).
 * Optional in the schema, so the OpenAPI document and the clients generated from it do not demand it; still
 * typed as present, because by the time a handler reads the query it always is.
 */
export function Defaulted<T extends TSchema>(schema: T): T {
  // Without a default the handler would get undefined where its type promises a value.
  if (!('default' in schema)) throw new Error('Defaulted needs a schema with a default');
  return Type.Optional(schema);
}

export const PAGE_SIZE_MAX = 100;

/** The query of a list read back in id order, newest first (src/id-cursor.ts makes and reads its cursors). */
export const IdPageQuery = Type.Object({
  limit: Defaulted(UrlInteger({ minimum: 1, maximum: PAGE_SIZE_MAX, default: 20 })),
  cursor: Type.Optional(Type.String({ maxLength: 64, description: 'The `nextCursor` of the previous page; leave it out for the newest' })),
});

/** Text in a query string or path, where `%00` decodes to a NUL character that PostgreSQL refuses in any query. */
export const UrlText = (options: TStringOptions) =>
  Type.String({ ...options, pattern: '^[^\\u0000]*$', [MESSAGE_KEYWORD]: 'must not contain NUL characters' });

/**
 * A string or null, as one `type: ["string", "null"]` rather than a union: a bad value then breaks one rule
 * with one readable message instead of one per branch.
 */
export const NullableString = (options: TStringOptions & Record<string, unknown> = {}) =>
  Type.Unsafe<string | null>({ ...Type.String(options), type: ['string', 'null'] });

/** Wraps a payload in the single key the RealWorld API puts around it: `{"user": {...}}`. */
export const Wrapped = <K extends string, T extends TSchema>(key: K, schema: T) => Type.Object({ [key]: schema } as { [P in K]: T });

export const ErrorBody = Type.Object(
  { errors: Type.Record(Type.String(), Type.Array(Type.String())) },
  { description: 'Every error: one key per problem, each with readable messages' },
);

/** Timestamps leave the API as ISO 8601 with milliseconds and `Z`. */
export const Timestamp = Type.String({ format: 'date-time' });
export { toIso } from './iso-time.js';

/**
 * What an article's or a comment's author reads about a hide (modules/moderation); absent while it is not hidden.
 * Nobody else meets hidden content.
 */
export const ModerationState = Type.Optional(
  Type.Object(
    { hidden: Type.Literal(true), reason: Type.String() },
    { description: 'Present only while hidden, and only to its author: hidden content is public to nobody else' },
  ),
);

/** The `moderation` field of an answer, from the row's hidden_reason (set exactly while it is hidden). */
export const moderationState = (hiddenReason: string | null) =>
  hiddenReason === null ? undefined : { moderation: { hidden: true as const, reason: hiddenReason } };

/** Declares the error statuses a route can answer with, all sharing the contract's error body. */
export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((status) => [status, ErrorBody])) as Record<number, typeof ErrorBody>;

/** The writes that take If-Match answer 412 instead of overwriting a version their client has not seen. */
export const IfMatchHeaders = Type.Object({
  'if-match': Type.Optional(
    Type.String({
      description:
        'The ETag of the copy the change is based on (from a GET, or the last PUT): when it is no longer the current ' +
        'version the answer is 412 and nothing is written. `*` only asks that it exists.',
    }),
  ),
});
