import type { FastifyInstance } from 'fastify';
import secureJson from 'secure-json-parse';
import { HttpError } from '../errors.js';

const NOT_JSON = () => new HttpError(400, { body: ['is not valid JSON'] });
/** Real requests nest three levels; the cap keeps any code that walks a body recursively safe from the stack. */
const MAX_DEPTH = 32;

/** Deepest nesting of arrays and objects, found without recursion and given up on past the cap. */
function exceedsMaxDepth(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const pending: Array<[object, number]> = [[value, 1]];
  for (let entry = pending.pop(); entry !== undefined; entry = pending.pop()) {
    const [node, depth] = entry;
    if (depth > MAX_DEPTH) return true;
    for (const child of Object.values(node)) {
      if (typeof child === 'object' && child !== null) pending.push([child, depth + 1]);
    }
  }
  return false;
}

/**
 * JSON with three differences from Fastify's parser: an empty body is no body at all (real clients send
 * `Content-Type: application/json` with nothing on follow, favorite and delete), and a NUL character is
 * refused up front because PostgreSQL cannot store one in text and SQLite would cut strings at it, and so is
 * nesting deeper than any real request needs.
 * `text/plain` is read as JSON too: `fetch()` labels a string body that way when a client forgets the header.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(['application/json', 'text/plain'], { parseAs: 'string' }, (_request, text, done) => {
    const source = (text as string).trim();
    if (source === '') return done(null, undefined);
    let value: unknown;
    try {
      // Prototype-poisoning keys are dropped rather than trusted.
      value = secureJson.parse(source, undefined, { protoAction: 'remove', constructorAction: 'remove' });
    } catch {
      return done(NOT_JSON(), undefined);
    }
    if (/(?<!\\)(?:\\\\)*\\u0000/i.test(source)) {
      return done(new HttpError(422, { body: ['must not contain NUL characters'] }), undefined);
    }
    if (exceedsMaxDepth(value)) {
      return done(new HttpError(422, { body: [`is nested too deeply (maximum is ${MAX_DEPTH} levels)`] }), undefined);
    }
    done(null, value);
  });
}
