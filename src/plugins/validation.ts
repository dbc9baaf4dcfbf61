import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

/** Schemas may name the message for a broken `pattern`, since a regex says nothing a reader understands. */
export const MESSAGE_KEYWORD = 'x-message';
/**
 * Marks a number read from a URL as finite. Ajv coerces "Infinity" and "1e999" to numbers that are not, and its
 * minimum and maximum checks pass over such numbers, so without this they would reach the database as a limit or id.
 */
export const FINITE_KEYWORD = 'x-finite';

function createAjv(options: Options): Ajv {
  const ajv = new Ajv({
    allErrors: true, // every bad field at once, as the contract asks
    verbose: true, // gives each error its data and parent schema, needed for readable messages
    useDefaults: true,
    ...options,
  });
  addFormats.default(ajv, ['email']);
  ajv.addKeyword(MESSAGE_KEYWORD);
  // Not a number keyword: those are skipped for non-finite numbers too.
  ajv.addKeyword({
    keyword: FINITE_KEYWORD,
    schemaType: 'boolean',
    validate: (finite: boolean, data: unknown) => !finite || (typeof data === 'number' && Number.isFinite(data)),
  });
  return ajv;
}

/**
 * The schema Ajv compiles: the same, except that an array's items are checked only once its length is within its
 * `maxItems`. With `allErrors`, Ajv would otherwise check, and report, every item of an oversized array: a 1 MiB
 * `tagList` of 340,000 blanks held the event loop for 0.6-1.4 s per request. The OpenAPI document keeps the plain
 * schema, which means the same to a client.
 */
function withBoundedItems(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withBoundedItems);
  if (typeof schema !== 'object' || schema === null) return schema;
  const { items, ...rest } = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, withBoundedItems(value)]));
  if (items === undefined) return rest;
  if (typeof rest.maxItems !== 'number') return { ...rest, items };
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then, read by Ajv, never awaited.
  return { ...rest, if: { maxItems: rest.maxItems }, then: { items } };
}

/**
 * Bodies are checked strictly (a number is not a title), while query strings and path parameters
 * arrive as text and must be coerced to the numbers their schemas describe.
 */
export function installValidation(app: FastifyInstance): void {
  const bodyAjv = createAjv({ coerceTypes: false });
  const textAjv = createAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(withBoundedItems(schema) as object));
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
  null: 'null',
};

function fieldOf(error: ErrorObject, context: string): string {
  if (error.keyword === 'required') return String(error.params.missingProperty);
  // "/article/tagList/3" names the field "tagList": the last segment that is not an array index.
  const segments = error.instancePath.split('/').filter((segment) => segment !== '' && !/^\d+$/.test(segment));
  return segments.at(-1)?.replace(/~1/g, '/').replace(/~0/g, '~') ?? (context === 'body' ? 'body' : context);
}

function messageOf(error: ErrorObject): string {
  const { keyword, params, data, parentSchema } = error;
  // An empty or all-blank string breaks several rules at once; "blank" is the one worth saying.
  if (typeof data === 'string' && data.trim() === '' && keyword !== 'maxLength') return "can't be blank";
  switch (keyword) {
    case 'required':
      return "can't be blank";
    case 'type': {
      if (data === null) return "can't be blank";
      const expected = String(params.type)
        .split(',')
        .filter((type) => type !== 'null');
      return `must be ${expected.map((type) => TYPE_NAMES[type] ?? type).join(' or ')}`;
    }
    case 'minLength':
      return `is too short (minimum is ${params.limit} characters)`;
    case 'maxLength':
      return `is too long (maximum is ${params.limit} characters)`;
    case 'minItems':
      return `has too few items (minimum is ${params.limit})`;
    case 'maxItems':
      return `has too many items (maximum is ${params.limit})`;
    case 'uniqueItems':
      return 'must not repeat an item';
    case 'minimum':
      return `must be at least ${params.limit}`;
    case 'maximum':
      return `must be at most ${params.limit}`;
    case FINITE_KEYWORD:
      return `must be ${TYPE_NAMES.integer}`;
    case 'format':
      return 'is invalid';
    case 'pattern': {
      const message = (parentSchema as Record<string, unknown> | undefined)?.[MESSAGE_KEYWORD];
      return typeof message === 'string' ? message : 'is invalid';
    }
    default:
      return 'is invalid';
  }
}

/** Turns Ajv's errors into the contract's body: one key per bad field, each message once. */
export function validationErrors(errors: ErrorObject[], context: string): Record<string, string[]> {
  const byField = new Map<string, Set<string>>();
  for (const error of errors) {
    // Says only that the `then` of withBoundedItems failed; the item errors that made it fail say why.
    if (error.keyword === 'if') continue;
    const field = fieldOf(error, context);
    const messages = byField.get(field) ?? new Set<string>();
    messages.add(messageOf(error));
    byField.set(field, messages);
  }
  return Object.fromEntries([...byField].map(([field, messages]) => [field, [...messages]]));
}
