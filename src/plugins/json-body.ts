import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import { errorCodes, type FastifyInstance, type FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { HttpError } from '../errors.js';

/** Real requests nest three levels; the cap keeps any code that walks a body recursively safe from the stack. */
const MAX_DEPTH = 32;
const INVALID_TEXT = 'must be valid Unicode text (a lone surrogate was sent)';

type Decoder = (encoded: Buffer, options: { maxOutputLength: number }) => Promise<Buffer>;

/** The Content-Encodings a body may come in; `x-gzip` is gzip's old name, which RFC 9110 (8.4.1.3) asks servers to take. */
const DECODERS = new Map<string, Decoder>([
  ['gzip', promisify(gunzip)],
  ['x-gzip', promisify(gunzip)],
  ['deflate', promisify(inflate)],
  ['br', promisify(brotliDecompress)],
]);

/**
 * A compressed body is decoded only up to the body limit, the same one that capped it as it arrived: zlib stops
 * there, so a few kilobytes that would expand to gigabytes (a zip bomb) cost no more memory or time than a body at
 * the limit, and get the same 413.
 */
async function decodeBody(request: FastifyRequest, body: Buffer): Promise<Buffer> {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || body.length === 0) return body;
  const decode = DECODERS.get(encoding);
  if (decode === undefined) throw new HttpError(415, { body: ['has a Content-Encoding other than gzip, deflate or br'] });
  try {
    return await decode(body, { maxOutputLength: request.routeOptions.bodyLimit });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
    throw new HttpError(400, { body: [`is not valid ${encoding}`] });
  }
}

/** A surrogate that is not half of a pair: with the `u` flag, a well-formed pair is one code point, not `Cs`. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * No request here holds an array of more than 20 items (the tags); past this, a body is refused before anything
 * looks at its items. A 1 MiB array of 340,000 blanks otherwise costs a walk and a validation per item.
 */
const MAX_ARRAY_ITEMS = 1000;

const isLoneSurrogateText = (value: unknown) => typeof value === 'string' && LONE_SURROGATE.test(value);

/**
 * What makes a parsed body unfit to go further, found without recursion: nesting past the cap, an array past its
 * cap, or a string (value or key) holding a lone surrogate, which JSON's `\ud800` can spell but UTF-8 cannot: the
 * two databases would store it differently (or turn it into U+FFFD), so the same request would read back two ways.
 */
function bodyProblem(value: unknown): string | undefined {
  if (isLoneSurrogateText(value)) return INVALID_TEXT;
  if (typeof value !== 'object' || value === null) return undefined;
  const pending: Array<[object, number]> = [[value, 1]];
  for (let entry = pending.pop(); entry !== undefined; entry = pending.pop()) {
    const [node, depth] = entry;
    if (depth > MAX_DEPTH) return `is nested too deeply (maximum is ${MAX_DEPTH} levels)`;
    if (Array.isArray(node) && node.length > MAX_ARRAY_ITEMS) return `holds an array of more than ${MAX_ARRAY_ITEMS} items`;
    const children: unknown[] = Array.isArray(node) ? node : Object.values(node);
    if (!Array.isArray(node) && Object.keys(node).some(isLoneSurrogateText)) return INVALID_TEXT;
    for (const child of children) {
      if (isLoneSurrogateText(child)) return INVALID_TEXT;
      if (typeof child === 'object' && child !== null) pending.push([child, depth + 1]);
    }
  }
  return undefined;
}

function parseJson(text: string): unknown {
  const source = text.trim();
  if (source === '') return undefined;
  let value: unknown;
  try {
    // Prototype-poisoning keys are dropped rather than trusted.
    value = secureJson.parse(source, undefined, { protoAction: 'remove', constructorAction: 'remove' });
  } catch {
    throw new HttpError(400, { body: ['is not valid JSON'] });
  }
  if (/(?<!\\)(?:\\\\)*\\u0000/i.test(source)) {
    throw new HttpError(422, { body: ['must not contain NUL characters'] });
  }
  const problem = bodyProblem(value);
  if (problem !== undefined) throw new HttpError(422, { body: [problem] });
  return value;
}

/**
 * JSON with these differences from Fastify's parser: an empty body is no body at all (real clients send
 * `Content-Type: application/json` with nothing on follow, favorite and delete); a NUL character is refused up
 * front because PostgreSQL cannot store one in text and SQLite would cut strings at it, and so are nesting deeper,
 * and arrays longer, than any real request needs, and text that is not valid Unicode; and a body may come
 * compressed (`Content-Encoding: gzip`, `deflate` or `br`).
 * `text/plain` is read as JSON too: `fetch()` labels a string body that way when a client forgets the header.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(['application/json', 'text/plain'], { parseAs: 'buffer' }, async (request: FastifyRequest, body: Buffer) =>
    parseJson((await decodeBody(request, body)).toString('utf8')),
  );
}
