import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { decodeJwt, SignJWT } from 'jose';
import { type TSchema, Type } from 'typebox';
import { BODY_LIMIT } from '../../src/app.js';
import { ArticleListResponse, ArticleResponse } from '../../src/modules/articles/schemas.js';
import { CommentListResponse, CommentResponse } from '../../src/modules/comments/schemas.js';
import { ProfileResponse } from '../../src/modules/profiles/schemas.js';
import { RevisionListResponse, RevisionResponse } from '../../src/modules/revisions/schemas.js';
import { DeletionResponse, UserResponse } from '../../src/modules/users/schemas.js';
import { TEST_SECRET } from './app.js';
import { call, createArticle, registerUser, type TestUser } from './client.js';

/**
 * Property-based fuzzing of the whole HTTP surface through `app.inject()`: hostile bodies, query strings, path
 * parameters and headers (Authorization, Content-Type, X-Request-Id, Idempotency-Key, Known-Device and its cookie) on every route, mixed with valid tokens, slugs and usernames from a small fixture so that
 * many requests get past authentication and validation into the handlers and the database.
 * The properties are the contract's: never a 5xx, JSON with the contract's error body on every 4xx, the route's
 * success body on every 2xx, a safe X-Request-Id, and no prototype pollution.
 */

const JSON_TYPE = 'application/json; charset=utf-8';
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** Generous for one request even on a loaded CI machine; a request that hangs is a defect too. */
const REQUEST_TIMEOUT_MS = 10_000;

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

interface Fixture {
  users: TestUser[];
  tags: string[];
  /** Tokens the server must refuse: forged, expired, for nobody, signed with another key or algorithm. */
  badTokens: string[];
}

/** A path segment: text sent as is, or a row of the database (the n-th user, article or comment) read when the request is sent. */
type Segment = { text: string } | { row: 'user' | 'article' | 'comment'; index: number };

interface FuzzRequest {
  method: string;
  path: Segment[];
  trailingSlash: boolean;
  query: string;
  headers: Record<string, string>;
  body: string | undefined;
}

interface RouteSpec {
  method: Method;
  path: string;
  /** The status of success, and the schema its body must match (none for 204). */
  status: number;
  schema?: TSchema;
  body?: fc.Arbitrary<unknown>;
}

// ---------------------------------------------------------------- the fixture

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

async function signed(claims: Record<string, unknown>, options: { secret?: string; alg?: string; exp?: number | null } = {}) {
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: options.alg ?? 'HS256', typ: 'JWT' })
    .setJti('fuzz')
    .setIssuedAt();
  if (options.exp !== null) jwt.setExpirationTime(options.exp ?? Math.floor(Date.now() / 1000) + 3600);
  return jwt.sign(new TextEncoder().encode(options.secret ?? TEST_SECRET));
}

/** Tokens that look right but must each be a 401: every way a token can be forged, stale or malformed. */
async function badTokens(userId: string, valid: string): Promise<string[]> {
  const claims = { sub: userId, ver: 0 };
  const [header, payload] = valid.split('.');
  return [
    await signed(claims, { secret: 'another-secret-that-is-long-enough-for-hs256-000' }),
    await signed(claims, { exp: null }),
    await signed(claims, { exp: Math.floor(Date.now() / 1000) - 60 }),
    await signed(claims, { alg: 'HS512' }),
    await signed({ sub: '999999', ver: 0 }),
    await signed({ sub: 'abc', ver: 0 }),
    await signed({ sub: '-1', ver: 0 }),
    await signed({ sub: userId, ver: '0' }),
    await signed({ sub: userId }),
    await signed({ sub: userId, ver: 1e308 }),
    `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ ...claims, jti: 'x', exp: 4102444800 })}.`,
    `${base64url({ alg: 'none' })}.${payload}.`,
    `${header}.${payload}.`,
    `${header}.${payload}`,
    `${valid}x`,
    `${valid.slice(0, -2)}AA`,
    'x.y.z',
    'e30.e30.e30',
  ];
}

/** Three users with articles, tags, follows, favorites and comments, so that valid-looking requests reach deep code. */
export async function createFixture(app: FastifyInstance): Promise<Fixture> {
  const users = [await registerUser(app, 'fuzz'), await registerUser(app, 'fuzz'), await registerUser(app, 'fuzz')];
  const tags = ['fuzz', 'ünïcödé', '日本語'];
  for (const [i, user] of users.entries()) {
    for (const title of [`Fuzz ${user.username}`, `Ça va? 日本 ${i}`]) {
      const article = await createArticle(app, user.token, { title, tagList: tags.slice(0, i + 1) });
      for (const reader of users) {
        await call(app, 'POST', `/api/articles/${article.slug}/comments`, { token: reader.token, body: { comment: { body: 'Nice' } } });
      }
      await call(app, 'POST', `/api/articles/${article.slug}/favorite`, { token: users[(i + 1) % users.length]?.token });
    }
  }
  const [first, second] = users as [TestUser, TestUser, TestUser];
  await call(app, 'POST', `/api/profiles/${second.username}/follow`, { token: first.token });
  return { users, tags, badTokens: await badTokens(String(decodeJwt(first.token).sub), first.token) };
}

/** Path parameters naming live rows: articles get renamed and deleted while the fuzzer runs. */
async function resolveSegment(app: FastifyInstance, segment: Segment): Promise<string[]> {
  if ('text' in segment) return [segment.text];
  if (segment.row === 'user') {
    const rows = await app.db.selectFrom('users').select('username').orderBy('id').limit(50).execute();
    return [encodeURIComponent(rows[segment.index % rows.length]?.username ?? 'nobody')];
  }
  if (segment.row === 'article') {
    const rows = await app.db.selectFrom('articles').select('slug').orderBy('id').limit(50).execute();
    return [encodeURIComponent(rows[segment.index % rows.length]?.slug ?? 'no-article')];
  }
  const rows = await app.db
    .selectFrom('comments')
    .innerJoin('articles', 'articles.id', 'comments.article_id')
    .select(['articles.slug', 'comments.id'])
    .orderBy('comments.id')
    .limit(50)
    .execute();
  const row = rows[segment.index % rows.length];
  return [row ? encodeURIComponent(row.slug) : 'no-article', 'comments', String(row?.id ?? 1)];
}

// ---------------------------------------------------------------- values

/** Printable ASCII and Latin-1: what can travel in an HTTP header at all. */
const headerText = (maxLength: number) =>
  fc.string({
    unit: fc
      .integer({ min: 0x20, max: 0xff })
      .filter((code) => code !== 0x7f)
      .map((code) => String.fromCharCode(code)),
    maxLength,
  });

/** Strings a careless handler could choke on: blanks, control characters, NUL, combining marks, astral and RTL text. */
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom(
    '',
    ' ',
    '\t\n',
    '\u0000',
    'a\u0000b',
    '\u2028\u2029',
    '\u200f\u202e',
    '\ufeff',
    'e\u0301',
    '👩‍👩‍👧',
    '𝒳',
    '../../etc/passwd',
    "'; drop table users; --",
    '%00',
    '<script>',
    '__proto__',
    'constructor',
    'null',
    '1e309',
  ),
);

/** Anything JSON can carry where one kind of value is expected: every other type, nesting, edge numbers. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, [], {}, [null], ['']) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** Strings of one character repeated to just below, at and just above a limit, in 1- and 2-unit characters. */
const aroundLimit = (limit: number) =>
  fc
    .tuple(fc.constantFrom(limit - 1, limit, limit + 1), fc.constantFrom('x', 'é', '日', '𝒳', ' '))
    .map(([length, char]) => char.repeat(length));

/** Mostly a valid value, else a hostile one, a length at the limit, or missing (JSON.stringify drops `undefined`). */
const field = (valid: fc.Arbitrary<unknown>, limit?: number) =>
  fc.oneof(
    { weight: 12, arbitrary: valid },
    { weight: 3, arbitrary: hostileValue },
    { weight: limit === undefined ? 0 : 1, arbitrary: aroundLimit(limit ?? 1) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );

const text = (maxLength: number) => fc.string({ unit: 'grapheme', minLength: 1, maxLength });

/** Keys no client may set, and keys that target the prototype chain. */
const extraKeys = fc.dictionary(
  fc.constantFrom('slug', 'author', 'favoritesCount', 'id', 'token', 'createdAt', '__proto__', 'constructor', 'prototype'),
  hostileValue,
  { maxKeys: 2 },
);

/** The route's body, wrapped in its key, its fields each valid or not, some missing, some extra. */
const wrapped = (key: string, fields: Record<string, fc.Arbitrary<unknown>>) =>
  fc
    .tuple(
      fc.record(fields),
      fc.option(extraKeys, { freq: 4 }),
      fc.oneof({ weight: 12, arbitrary: fc.constant('wrapped') }, fc.constantFrom('bare', 'array', 'other key')),
    )
    .map(([inner, extra, shape]) => {
      const payload = { ...extra, ...inner };
      if (shape === 'bare') return payload;
      if (shape === 'array') return [{ [key]: payload }];
      return { [shape === 'wrapped' ? key : key.toUpperCase()]: payload };
    });

function bodies(fixture: Fixture): Record<string, fc.Arbitrary<unknown>> {
  const username = fc.oneof(fc.stringMatching(/^[\p{L}\p{N}_.-]{1,20}$/u), fc.constantFrom(...fixture.users.map((user) => user.username)));
  const email = fc.oneof(fc.emailAddress(), fc.constantFrom(...fixture.users.map((user) => user.email)));
  const emailAroundLimit = fc.constantFrom(253, 254, 255).map((length) => `${'a'.repeat(length - 12)}@example.com`);
  // Mostly the fixture's own password, so that changing it leaves the fixture able to log in.
  const password = fc.oneof(fc.constantFrom(...fixture.users.map((user) => user.password)), fc.string({ minLength: 8, maxLength: 30 }));
  const tagList = fc.oneof(
    fc.array(fc.oneof(fc.constantFrom(...fixture.tags), text(10), hostileValue, aroundLimit(64)), { maxLength: 5 }),
    fc.constantFrom(19, 20, 21).map((count) => Array.from({ length: count }, (_, i) => `t${i}`)),
  );
  return {
    register: wrapped('user', {
      username: field(username, 64),
      email: fc.oneof(field(email), emailAroundLimit),
      password: field(password, 256),
    }),
    login: wrapped('user', { email: field(email, 254), password: field(password, 256) }),
    updateUser: wrapped('user', {
      username: field(username, 64),
      email: field(email),
      password: field(password, 256),
      bio: field(fc.oneof(text(50), fc.constant('')), 1000),
      image: field(fc.oneof(fc.webUrl(), fc.constant('')), 2048),
    }),
    // Creation and (partial) update take the same fields.
    article: wrapped('article', {
      title: field(text(30), 256),
      description: field(text(30), 1024),
      body: field(text(60), 100_000),
      tagList: field(tagList),
    }),
    newComment: wrapped('comment', { body: field(text(60), 10_000) }),
  };
}

// ---------------------------------------------------------------- routes

const TagsResponse = Type.Object({ tags: Type.Array(Type.String()) });
const HealthResponse = Type.Object({ status: Type.Literal('ok') });
const IndexResponse = Type.Object({
  name: Type.String(),
  version: Type.String(),
  links: Type.Object({ docs: Type.String(), openapi: Type.String(), liveness: Type.String(), readiness: Type.String() }),
});

function routes(fixture: Fixture): RouteSpec[] {
  const body = bodies(fixture);
  // Static paths before parameters, as the router matches them: /articles/feed is not an article.
  return [
    { method: 'POST', path: '/api/users', status: 201, schema: UserResponse, body: body.register },
    { method: 'POST', path: '/api/users/login', status: 200, schema: UserResponse, body: body.login },
    { method: 'GET', path: '/api/user', status: 200, schema: UserResponse },
    { method: 'PUT', path: '/api/user', status: 200, schema: UserResponse, body: body.updateUser },
    // With the fixture's own password a request deletes its account (202), which a run may well send.
    { method: 'DELETE', path: '/api/user', status: 202, schema: DeletionResponse },
    { method: 'GET', path: '/api/profiles/:username', status: 200, schema: ProfileResponse },
    { method: 'POST', path: '/api/profiles/:username/follow', status: 200, schema: ProfileResponse },
    { method: 'DELETE', path: '/api/profiles/:username/follow', status: 200, schema: ProfileResponse },
    { method: 'GET', path: '/api/articles', status: 200, schema: ArticleListResponse },
    { method: 'GET', path: '/api/articles/feed', status: 200, schema: ArticleListResponse },
    { method: 'POST', path: '/api/articles', status: 201, schema: ArticleResponse, body: body.article },
    { method: 'GET', path: '/api/articles/:slug', status: 200, schema: ArticleResponse },
    { method: 'PUT', path: '/api/articles/:slug', status: 200, schema: ArticleResponse, body: body.article },
    { method: 'DELETE', path: '/api/articles/:slug', status: 204 },
    { method: 'POST', path: '/api/articles/:slug/favorite', status: 200, schema: ArticleResponse },
    { method: 'DELETE', path: '/api/articles/:slug/favorite', status: 200, schema: ArticleResponse },
    { method: 'GET', path: '/api/articles/:slug/comments', status: 200, schema: CommentListResponse },
    { method: 'POST', path: '/api/articles/:slug/comments', status: 201, schema: CommentResponse, body: body.newComment },
    { method: 'DELETE', path: '/api/articles/:slug/comments/:id', status: 204 },
    { method: 'GET', path: '/api/articles/:slug/revisions', status: 200, schema: RevisionListResponse },
    { method: 'GET', path: '/api/articles/:slug/revisions/:id', status: 200, schema: RevisionResponse },
    { method: 'POST', path: '/api/articles/:slug/revisions/:id/restore', status: 200, schema: ArticleResponse },
    { method: 'GET', path: '/api/tags', status: 200, schema: TagsResponse },
    { method: 'GET', path: '/health/live', status: 200, schema: HealthResponse },
    { method: 'GET', path: '/health/ready', status: 200, schema: HealthResponse },
    { method: 'GET', path: '/', status: 200, schema: IndexResponse },
    { method: 'GET', path: '/api', status: 200, schema: IndexResponse },
  ];
}

const matcher = (path: string) => new RegExp(`^${path.replace(/:\w+/g, '[^/]+')}/?$`);

// ---------------------------------------------------------------- requests

const junkSegment = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 30 }).map(encodeURIComponent),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).map(encodeURIComponent),
  fc.constantFrom(
    '',
    '%',
    '%ZZ',
    '%E0%A4%A',
    '%C0%AE',
    '%FF',
    '%00',
    '%2F',
    '%2e%2e',
    '%20',
    '.',
    '..',
    '...',
    'feed',
    '__proto__',
    'constructor',
    'hasOwnProperty',
    'null',
    '-1',
    '0',
    '1e3',
    '0x1F',
    '+1',
    '01',
    '1.5',
    '2147483648',
    '9007199254740993',
  ),
  fc.constantFrom(256, 512, 513, 1024, 1025, 5000).map((length) => 'a'.repeat(length)),
  fc.tuple(fc.constantFrom(...'0789acfgAFZ%'), fc.constantFrom(...'0789acfgAFZ%')).map(([a, b]) => `%${a}${b}`),
);

const row = (name: 'user' | 'article' | 'comment') => fc.nat({ max: 49 }).map((index): Segment => ({ row: name, index }));
const junk = junkSegment.map((text): Segment => ({ text }));

const PARAMETERS: Record<string, fc.Arbitrary<Segment>> = {
  username: fc.oneof({ weight: 3, arbitrary: row('user') }, { weight: 2, arbitrary: junk }),
  slug: fc.oneof({ weight: 3, arbitrary: row('article') }, { weight: 2, arbitrary: junk }),
  id: fc.oneof(
    junk,
    fc.integer().map((n): Segment => ({ text: String(n) })),
  ),
};

/** The route's path with each parameter drawn on its own. */
function pathFor(spec: RouteSpec): fc.Arbitrary<Segment[]> {
  const parts = spec.path.split('/').slice(1);
  const independent = fc.tuple(
    ...parts.map((part) => (part.startsWith(':') ? (PARAMETERS[part.slice(1)] ?? junk) : fc.constant<Segment>({ text: part }))),
  );
  if (!spec.path.endsWith('/:id')) return independent;
  // A comment id names a comment only under its own article: one row gives the slug and the id.
  return fc.oneof(
    row('comment').map((comment): Segment[] => [{ text: 'api' }, { text: 'articles' }, comment]),
    independent,
  );
}

const unknownPath: fc.Arbitrary<Segment[]> = fc.oneof(
  fc
    .constantFrom('', 'api', 'api/', 'health', 'health/x', 'API/tags', 'api/users/login/x', 'api/articles/a/b/c/d', '.env', 'api/profiles')
    .map((path) => path.split('/').map((text): Segment => ({ text }))),
  fc.array(junk, { minLength: 1, maxLength: 4 }).map((segments) => [{ text: 'api' }, ...segments]),
);

const queryValue = (fixture: Fixture) =>
  fc.oneof(
    fc.constantFrom(
      '',
      '0',
      '1',
      '20',
      '100',
      '101',
      '-1',
      '1.5',
      '1e2',
      '0x10',
      'NaN',
      'Infinity',
      ' 1',
      '9007199254740993',
      '1'.repeat(400),
      'true',
      'null',
    ),
    fc.constantFrom(...fixture.tags, ...fixture.users.map((user) => user.username)).map(encodeURIComponent),
    junkSegment,
    aroundLimit(256).map(encodeURIComponent),
  );

const queryKey = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('limit', 'offset', 'tag', 'author', 'favorited') },
  {
    weight: 2,
    arbitrary: fc.constantFrom('limit[]', 'tag[]', 'tag[0]', 'author[a]', '__proto__', 'constructor', 'hasOwnProperty', '', 'a.b'),
  },
  { weight: 1, arbitrary: junkSegment },
);

const query = (fixture: Fixture) =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constant('') },
    {
      weight: 6,
      arbitrary: fc
        .array(fc.tuple(queryKey, queryValue(fixture)), { maxLength: 5 })
        .map((pairs) => pairs.map(([key, value]) => `${key}=${value}`).join('&')),
    },
    { weight: 1, arbitrary: fc.constantFrom('&&&', '=', '==', 'limit', 'limit&limit', '%', 'tag=%ZZ', '?', '#') },
  );

function authorization(fixture: Fixture): fc.Arbitrary<string | undefined> {
  const valid = fc.constantFrom(...fixture.users.map((user) => user.token));
  const scheme = fc.oneof(
    { weight: 6, arbitrary: fc.constant('Token ') },
    fc.constantFrom('Bearer ', 'token ', 'BEARER ', 'Token   ', 'Basic ', ''),
  );
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 14, arbitrary: fc.tuple(scheme, valid).map(([prefix, token]) => prefix + token) },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.constantFrom(' extra', '.', ',x', ' ')).map(([token, suffix]) => `Token ${token}${suffix}`),
    },
    { weight: 3, arbitrary: fc.tuple(scheme, fc.constantFrom(...fixture.badTokens)).map(([prefix, token]) => prefix + token) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('', ' ', 'Token', 'Token ', 'Bearer', 'Bearer x.y.z', 'Token a b', `Token ${'a'.repeat(10_000)}`),
    },
    { weight: 1, arbitrary: headerText(60) },
  );
}

const contentType = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 12, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain') },
  fc.constantFrom(
    'application/json; charset=utf-8',
    'application/json; charset=latin1',
    'APPLICATION/JSON',
    'application/json;',
    'text/plain',
    'text/plain; charset=utf-8',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonx',
    'application/vnd.api+json',
    'text/html',
    '*/*',
    '',
  ),
  headerText(40),
);

const requestId = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/),
  headerText(40),
  fc.constantFrom('', 'a'.repeat(128), 'a'.repeat(129), 'id with spaces', '"quoted"', '<script>'),
);

/** Fresh keys, keys reused across different requests, and keys too long or blank. */
const idempotencyKey = fc.oneof(fc.uuid(), fc.constantFrom('fuzz-1', 'fuzz-2', '', ' ', 'k'.repeat(255), 'k'.repeat(256)), headerText(40));

/** Values shaped like a login's known-device value (modules/users/devices.ts), or not, or longer than allowed. */
const knownDevice = fc.oneof(
  fc.stringMatching(/^\d{1,16}\.\d{1,16}\.[\w-]{22}\.\d{1,16}\.[\w-]{43}$/),
  fc.constantFrom('', '.', '....', '1.0.x.1.y', `1.0.${'a'.repeat(22)}.9999999999.${'b'.repeat(43)}`, 'v'.repeat(256), 'v'.repeat(257)),
  headerText(60),
);

/** A JSON text object with `__proto__` and `constructor.prototype` keys, which JSON.stringify never writes. */
const pollutingText = (key: string, inner: fc.Arbitrary<unknown>) =>
  fc.tuple(inner, hostileValue).map(([value, payload]) => {
    const entries = typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.entries(value) : [];
    const members = [
      `"__proto__":{"polluted":${JSON.stringify(payload) ?? 'null'}}`,
      `"constructor":{"prototype":{"polluted":true}}`,
      ...entries.map(([name, member]) => `${JSON.stringify(name)}:${JSON.stringify(member) ?? 'null'}`),
    ];
    return `{"__proto__":{"polluted":true},${JSON.stringify(key)}:{${members.join(',')}}}`;
  });

/** Bodies at the size limit exactly and one byte over it. */
const sizedBody = fc.constantFrom(BODY_LIMIT, BODY_LIMIT + 1).map((size) => {
  const head = '{"pad":"';
  return `${head}${'x'.repeat(size - head.length - 2)}"}`;
});

/** Nesting deep enough to break anything recursive, still under the size limit. */
const deepBody = fc.constantFrom(1000, 100_000, 400_000).map((depth) => `{"user":${'['.repeat(depth)}${']'.repeat(depth)}}`);

function body(spec: RouteSpec | undefined): fc.Arbitrary<string | undefined> {
  const valid = spec?.body ?? fc.constant({});
  const key = spec?.path.includes('comments') ? 'comment' : spec?.path.includes('article') ? 'article' : 'user';
  const json = (value: unknown) => JSON.stringify(value) ?? 'null';
  return fc.oneof(
    { weight: 6, arbitrary: fc.constant(undefined) },
    { weight: 12, arbitrary: valid.map(json) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map(json) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value) => json({ [key]: value })) },
    { weight: 2, arbitrary: pollutingText(key, valid) },
    // Broken JSON: valid text cut short, arbitrary text, and texts that only look like JSON.
    { weight: 2, arbitrary: fc.tuple(valid.map(json), fc.nat()).map(([source, cut]) => source.slice(0, cut % Math.max(1, source.length))) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 40 }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '{',
        '{"a":}',
        "{'user':{}}",
        'NaN',
        '[1,]',
        '{"a":1}{"b":2}',
        '\ufeff{}',
        '"\\u0000"',
        '{"a":"\\ud800"}',
        'null',
        '0',
        '""',
        '[]',
      ),
    },
    { weight: 1, arbitrary: sizedBody },
    { weight: 1, arbitrary: deepBody },
  );
}

/** One request: a route (or an unknown path), mostly its own method, with arbitrary query, headers and body. */
function requests(specs: RouteSpec[], fixture: Fixture): fc.Arbitrary<FuzzRequest> {
  const anyMethod = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS');
  const forRoute = (spec: RouteSpec | undefined) =>
    fc.record({
      method: spec ? fc.oneof({ weight: 9, arbitrary: fc.constant(spec.method) }, { weight: 1, arbitrary: anyMethod }) : anyMethod,
      path: spec ? pathFor(spec) : unknownPath,
      trailingSlash: fc.boolean(),
      query: query(fixture),
      headers: fc
        .record({
          authorization: authorization(fixture),
          'content-type': contentType,
          'x-request-id': fc.option(requestId, { nil: undefined }),
          'idempotency-key': fc.option(idempotencyKey, { nil: undefined, freq: 3 }),
          'known-device': fc.option(knownDevice, { nil: undefined, freq: 3 }),
          cookie: fc.option(
            knownDevice.map((value) => `conduit_device=${value}`),
            { nil: undefined, freq: 3 },
          ),
        })
        .map((headers) => Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string] => entry[1] !== undefined))),
      body: body(spec),
    });
  return fc.oneof(...specs.map((spec) => forRoute(spec)), forRoute(undefined));
}

// ---------------------------------------------------------------- properties

const ajv = new Ajv({ allErrors: true, strict: false });
addFormats.default(ajv, ['date-time']);
const validators = new Map<TSchema, ValidateFunction>();
const validatorFor = (schema: TSchema) => validators.get(schema) ?? validators.set(schema, ajv.compile(schema)).get(schema)!;

/** `{"errors": {<key>: [<non-empty strings>]}}` and nothing else. */
function isErrorBody(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  if (Object.keys(body).join() !== 'errors') return false;
  const errors = (body as { errors: unknown }).errors;
  if (typeof errors !== 'object' || errors === null || Array.isArray(errors)) return false;
  const lists = Object.values(errors);
  return (
    lists.length > 0 &&
    lists.every(
      (messages) =>
        Array.isArray(messages) && messages.length > 0 && messages.every((message) => typeof message === 'string' && message !== ''),
    )
  );
}

/** What is wrong with an answer, or null when it keeps every property. */
function problemWith(
  specs: RouteSpec[],
  sent: InjectOptions & { url: string; method: string },
  response: LightMyRequestResponse,
): string | null {
  const { statusCode: status, headers } = response;
  if (status >= 500) return 'a server error';
  if (status < 200 || (status >= 300 && status < 400)) return 'an unexpected status';
  const id = headers['x-request-id'];
  if (typeof id !== 'string' || !ACCEPTED_REQUEST_ID.test(id)) return 'a missing or unsafe X-Request-Id';
  const sentId = (sent.headers as Record<string, string> | undefined)?.['x-request-id'];
  if (sentId !== undefined && ACCEPTED_REQUEST_ID.test(sentId) && id !== sentId) return 'X-Request-Id not kept';
  if (Object.keys(Object.prototype).length > 0 || 'polluted' in {}) return 'a polluted Object.prototype';

  // As sent: inject() resolves `.` and `..` segments, as browsers and most clients do.
  const path = new URL(sent.url, 'http://localhost').pathname;
  const lookup = sent.method === 'HEAD' ? 'GET' : sent.method;
  const spec = specs.find((candidate) => candidate.method === lookup && matcher(candidate.path).test(path));
  if (status === 204 || sent.method === 'HEAD') {
    if (response.body !== '') return 'a body where none belongs';
    if (status === 204 && sent.method !== 'OPTIONS' && spec?.status !== 204) return 'an unexpected 204';
    return null;
  }
  if (headers['content-type'] !== JSON_TYPE) return 'a content type other than JSON';
  let body: unknown;
  try {
    body = JSON.parse(response.body);
  } catch {
    return 'a body that is not JSON';
  }
  if (status >= 400) return isErrorBody(body) ? null : 'an error body not in the contract shape';
  if (spec === undefined) return 'a success on a path that is no route';
  if (status !== spec.status) return `a success status other than ${spec.status}`;
  const validate = validatorFor(spec.schema ?? Type.Null());
  return validate(body) ? null : `a success body not matching the route: ${ajv.errorsText(validate.errors)}`;
}

const clip = (value: string | undefined, length = 300) =>
  value !== undefined && value.length > length ? `${value.slice(0, length)}... (${value.length} characters)` : value;

/** fast-check's report of a failure, with lines cut short: a counterexample can hold a body of a mebibyte. */
export const failureReport = (details: fc.RunDetails<unknown>) =>
  (fc.defaultReportMessage(details) ?? '')
    .split('\n')
    .map((line) => clip(line, 2000))
    .join('\n');

export interface FuzzOutcome {
  requests: number;
  /** How many answers had each status: how deep the requests got (mostly 401 and 415 would mean not very). */
  statuses: Map<number, number>;
  details: fc.RunDetails<unknown>;
}

/**
 * Runs `runs` generated requests against `app` (with a fixture already created in it) and returns fast-check's
 * verdict; a failure's error message shows the request as sent and the answer, after shrinking.
 */
export async function fuzz(app: FastifyInstance, fixture: Fixture, options: { runs: number; seed: number }): Promise<FuzzOutcome> {
  const specs = routes(fixture);
  let sentCount = 0;
  const statuses = new Map<number, number>();
  const property = fc.asyncProperty(requests(specs, fixture), async (request) => {
    const route: string[] = [];
    for (const segment of request.path) route.push(...(await resolveSegment(app, segment)));
    const path = `/${route.join('/')}`;
    const url = `${path}${request.trailingSlash && !path.endsWith('/') ? '/' : ''}${request.query === '' ? '' : `?${request.query}`}`;
    const sent = { method: request.method, url, headers: request.headers, ...(request.body !== undefined && { payload: request.body }) };
    sentCount += 1;
    const response = await app.inject(sent as InjectOptions);
    statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
    const problem = problemWith(specs, sent, response);
    if (problem !== null) {
      throw new Error(
        [
          `${problem}`,
          `request: ${request.method} ${clip(url)}`,
          `  headers: ${clip(JSON.stringify(request.headers))}`,
          `  body: ${clip(request.body)}`,
          `response: ${response.statusCode}`,
          `  headers: ${JSON.stringify(response.headers)}`,
          `  body: ${clip(response.body)}`,
        ].join('\n'),
      );
    }
  });
  const details = await fc.check(property, {
    numRuns: options.runs,
    seed: options.seed,
    plugins: [fc.timeout(REQUEST_TIMEOUT_MS)],
    includeErrorInReport: true,
  });
  return { requests: sentCount, statuses, details };
}

/** The seed to use: FUZZ_SEED when set (to replay a failure), else a fresh one. */
export function fuzzSeed(): number {
  const fromEnv = process.env.FUZZ_SEED;
  if (fromEnv !== undefined && fromEnv !== '') {
    const seed = Number(fromEnv);
    if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, got "${fromEnv}"`);
    return seed;
  }
  return Date.now() ^ (Math.random() * 0x100000000);
}
