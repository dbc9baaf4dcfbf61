import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, describeEachDatabase, testConfig } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const NOT_JSON = { errors: { body: ['is not valid JSON'] } };
const TOO_LARGE = { errors: { body: ['is too large'] } };
const ROUTE_NOT_FOUND = { errors: { route: ['not found'] } };
const MIB = 1024 * 1024;
const ORIGIN = 'https://frontend.example';

/** One raw request: a string body is sent as is, so broken JSON and odd sizes reach the server untouched. */
async function raw(app: FastifyInstance, options: InjectOptions) {
  const response = await app.inject(options);
  return {
    status: response.statusCode,
    headers: response.headers,
    text: response.body,
    json: () => JSON.parse(response.body) as unknown,
  };
}

/** The contract's error body: an object of keys, each with a non-empty list of messages. */
function expectErrorBody(body: unknown): void {
  expect(body).toEqual({ errors: expect.any(Object) });
  const errors = (body as { errors: Record<string, unknown> }).errors;
  expect(Object.keys(errors).length).toBeGreaterThan(0);
  for (const messages of Object.values(errors)) expect(messages).toEqual(expect.arrayContaining([expect.any(String)]));
}

/** A registration body of exactly `size` bytes, padded by an unknown key the server ignores. */
function registrationOfSize(size: number): string {
  const username = unique('big');
  const head = `{"user":{"username":"${username}","email":"${username}@example.com","password":"password123","padding":"`;
  const tail = '"}}';
  return head + 'x'.repeat(size - head.length - tail.length) + tail;
}

describeEachDatabase('http', (ctx) => {
  const app = () => ctx().app;

  // ---------------------------------------------------------------- unknown routes

  it('answers 404 {"errors":{"route":["not found"]}} for unknown routes', async () => {
    const requests: Array<[InjectOptions['method'], string]> = [
      ['GET', '/api/nope'],
      ['POST', '/api/nope'],
      ['PATCH', '/api/nope'],
      ['GET', '/users'],
      ['GET', '/api/articles/some-slug/comments/1/extra'],
    ];
    for (const [method, url] of requests) {
      const response = await raw(app(), { method, url });
      expect(response.status, `${method} ${url}`).toBe(404);
      expect(response.json(), `${method} ${url}`).toEqual(ROUTE_NOT_FOUND);
      expect(response.headers['content-type'], `${method} ${url}`).toBe(JSON_TYPE);
    }
  });

  it('answers 405 with the methods the path takes in Allow for a method a known path does not take', async () => {
    // OPTIONS is in every Allow: CORS answers it on every path.
    const requests: Array<[InjectOptions['method'], string, string]> = [
      ['PATCH', '/api/articles/some-slug', 'GET, HEAD, DELETE, OPTIONS, PUT'],
      ['PATCH', '/api/articles/some-slug/', 'GET, HEAD, DELETE, OPTIONS, PUT'],
      ['POST', '/api/articles/some-slug/comments/1', 'DELETE, OPTIONS'],
      ['GET', '/api/users', 'OPTIONS, POST'],
      // DELETE /api/user: leaving (CONTRACT.md, Lifecycle).
      ['PATCH', '/api/user', 'GET, HEAD, DELETE, OPTIONS, PUT'],
      ['DELETE', '/api/tags', 'GET, HEAD, OPTIONS'],
      ['PROPFIND', '/api/tags?limit=1', 'GET, HEAD, OPTIONS'],
      ['DELETE', '/api', 'GET, HEAD, OPTIONS'],
      ['POST', '/', 'GET, HEAD, OPTIONS'],
    ];
    for (const [method, url, allow] of requests) {
      const response = await raw(app(), { method, url });
      expect(response.status, `${method} ${url}`).toBe(405);
      expect(response.headers.allow, `${method} ${url}`).toBe(allow);
      expect(response.json(), `${method} ${url}`).toEqual({ errors: { method: [`${method} is not allowed on this path`] } });
      expect(response.headers['content-type'], `${method} ${url}`).toBe(JSON_TYPE);
    }
    const head = await raw(app(), { method: 'HEAD', url: '/api/users' });
    expect([head.status, head.headers.allow, head.text]).toEqual([405, 'OPTIONS, POST', '']);
  });

  it('answers 404 route for an unknown route even with a token and a body', async () => {
    const user = await registerUser(app());
    const response = await call(app(), 'POST', '/api/unknown', { token: user.token, body: { anything: true } });
    expect(response.status).toBe(404);
    expect(response.body).toEqual(ROUTE_NOT_FOUND);
  });

  // ---------------------------------------------------------------- malformed URLs

  it('never answers 500 for malformed percent-encoding in the URL', async () => {
    const user = await registerUser(app());
    const urls = [
      '/api/profiles/%E0%A4%A',
      '/api/profiles/%',
      '/api/profiles/%ZZ',
      '/api/%',
      '/api/%ZZ',
      '/api/articles/%E0%A4%A',
      '/api/articles/%C0%AF/comments',
      '/api/articles?tag=%E0%A4%A',
      '/api/articles?author=%&favorited=%ZZ',
      '/api/profiles/%FF%FE/follow',
    ];
    for (const url of urls) {
      for (const token of [undefined, user.token]) {
        const response = await raw(app(), { method: 'GET', url, headers: token ? { authorization: `Token ${token}` } : {} });
        expect(response.status, url).toBeLessThan(500);
        expect(response.headers['content-type'], url).toBe(JSON_TYPE);
        if (response.status >= 400) expectErrorBody(response.json());
      }
    }
  });

  it('answers 400 for a path segment that is not valid percent-encoded UTF-8', async () => {
    const response = await raw(app(), { method: 'GET', url: '/api/profiles/%E0%A4%A' });
    expect(response.status).toBe(400);
    expectErrorBody(response.json());
  });

  // ---------------------------------------------------------------- bodies

  it('answers 400 {"errors":{"body":["is not valid JSON"]}} for bodies that are not JSON', async () => {
    const user = await registerUser(app());
    const bodies = ['{bad', '{"user": {', "{'user': {}}", '{"user": {},}', 'undefined', '{"a":1}}'];
    const routes: Array<[InjectOptions['method'], string, string | undefined]> = [
      ['POST', '/api/users', undefined],
      ['POST', '/api/users/login', undefined],
      ['PUT', '/api/user', user.token],
      ['POST', '/api/articles', user.token],
    ];
    for (const [method, url, token] of routes) {
      for (const payload of bodies) {
        const response = await raw(app(), {
          method,
          url,
          payload,
          headers: { 'content-type': 'application/json', ...(token && { authorization: `Token ${token}` }) },
        });
        expect(response.status, `${method} ${url} ${payload}`).toBe(400);
        expect(response.json(), `${method} ${url} ${payload}`).toEqual(NOT_JSON);
        expect(response.headers['content-type']).toBe(JSON_TYPE);
      }
    }
  });

  it('answers 413 {"errors":{"body":["is too large"]}} for a body over 1 MiB', async () => {
    const user = await registerUser(app());
    const response = await raw(app(), {
      method: 'POST',
      url: '/api/users',
      headers: { 'content-type': 'application/json' },
      payload: registrationOfSize(MIB + 1),
    });
    expect(response.status).toBe(413);
    expect(response.json()).toEqual(TOO_LARGE);
    expect(response.headers['content-type']).toBe(JSON_TYPE);

    const article = JSON.stringify({ article: { title: 't', description: 'd', body: 'b'.repeat(2 * MIB) } });
    const signedIn = await raw(app(), {
      method: 'POST',
      url: '/api/articles',
      headers: { 'content-type': 'application/json', authorization: `Token ${user.token}` },
      payload: article,
    });
    expect(signedIn.status).toBe(413);
    expect(signedIn.json()).toEqual(TOO_LARGE);
  });

  it('accepts a body of exactly 1 MiB', async () => {
    const payload = registrationOfSize(MIB);
    expect(Buffer.byteLength(payload)).toBe(MIB);
    const response = await raw(app(), { method: 'POST', url: '/api/users', headers: { 'content-type': 'application/json' }, payload });
    expect(response.status).toBe(201);
  });

  it('reads a body compressed with gzip, deflate or br, up to 1 MiB once decoded', async () => {
    const compressors: Array<[string, (body: string) => Buffer]> = [
      ['gzip', (body) => gzipSync(body)],
      ['deflate', (body) => deflateSync(body)],
      ['br', (body) => brotliCompressSync(body)],
    ];
    for (const [encoding, compress] of compressors) {
      const send = (size: number) =>
        raw(app(), {
          method: 'POST',
          url: '/api/users',
          headers: { 'content-type': 'application/json', 'content-encoding': encoding },
          payload: compress(registrationOfSize(size)),
        });
      const atLimit = await send(MIB);
      expect(atLimit.status, encoding).toBe(201);
      const overLimit = await send(MIB + 1);
      expect(overLimit.status, encoding).toBe(413);
      expect(overLimit.json(), encoding).toEqual(TOO_LARGE);
    }
  });

  it('refuses a compressed body that expands past 1 MiB with 413 at once, decoding no further than the limit', async () => {
    const gzipped = (bytes: number) => gzipSync(Buffer.alloc(bytes));
    // 10 MiB of zeros in 10 KiB; then 512 MiB in 0.5 MiB, as gzip members one after another.
    const bombs = [gzipped(10 * MIB), Buffer.concat(Array<Buffer>(8).fill(gzipped(64 * MIB)))];
    for (const bomb of bombs) {
      const peakBefore = process.resourceUsage().maxRSS;
      const started = performance.now();
      const response = await raw(app(), {
        method: 'POST',
        url: '/api/users',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        payload: bomb,
      });
      expect(response.status).toBe(413);
      expect(response.json()).toEqual(TOO_LARGE);
      expect(performance.now() - started).toBeLessThan(1000);
      // The process's peak memory (KiB) grew by far less than the bomb's decoded size.
      expect(process.resourceUsage().maxRSS - peakBefore).toBeLessThan(64 * 1024);
    }
  });

  it('answers 415 for a Content-Encoding it does not read and 400 for a body not in its Content-Encoding', async () => {
    const send = (encoding: string, payload: string | Buffer) =>
      raw(app(), {
        method: 'POST',
        url: '/api/users',
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        payload,
      });
    const registration = registrationOfSize(200);
    for (const encoding of ['zstd', 'compress', 'gzip, br']) {
      const response = await send(encoding, gzipSync(registration));
      expect(response.status, encoding).toBe(415);
      expect(response.json(), encoding).toEqual({ errors: { body: ['has a Content-Encoding other than gzip, deflate or br'] } });
    }
    const notGzip = await send('gzip', registration);
    expect(notGzip.status).toBe(400);
    expect(notGzip.json()).toEqual({ errors: { body: ['is not valid gzip'] } });
    // The names are case-insensitive, and identity is no encoding at all.
    expect((await send(' GZip ', gzipSync(registrationOfSize(200)))).status).toBe(201);
    expect((await send('identity', registrationOfSize(200))).status).toBe(201);
  });

  it('answers 401 before 413 on a route that needs a token', async () => {
    const payload = JSON.stringify({ article: { title: 't', description: 'd', body: 'b'.repeat(2 * MIB) } });
    const response = await raw(app(), { method: 'POST', url: '/api/articles', headers: { 'content-type': 'application/json' }, payload });
    expect(response.status).toBe(401);
    expect(response.json()).toEqual({ errors: { token: ['is missing'] } });
  });

  it('treats an empty body sent as application/json as no body', async () => {
    const fan = await registerUser(app());
    const star = await registerUser(app());
    for (const method of ['POST', 'DELETE'] as const) {
      const response = await raw(app(), {
        method,
        url: `/api/profiles/${star.username}/follow`,
        headers: { 'content-type': 'application/json', authorization: `Token ${fan.token}` },
        payload: '',
      });
      expect(response.status, method).toBe(200);
      expect((response.json() as { profile: { following: boolean } }).profile.following).toBe(method === 'POST');
    }
    // Where a body is required, an empty one is a missing one: 422, not 400.
    const register = await raw(app(), { method: 'POST', url: '/api/users', headers: { 'content-type': 'application/json' }, payload: '' });
    expect(register.status).toBe(422);
    expectErrorBody(register.json());
  });

  it('never answers 500 for a NUL character in a body', async () => {
    const user = await registerUser(app());
    const username = unique('nul');
    const register = await call(app(), 'POST', '/api/users', {
      body: { user: { username: `${username}\u0000x`, email: `${username}@example.com`, password: 'password123' } },
    });
    expect(register.status).toBeGreaterThanOrEqual(400);
    expect(register.status).toBeLessThan(500);
    expectErrorBody(register.body);
    const update = await call(app(), 'PUT', '/api/user', { token: user.token, body: { user: { bio: 'a\u0000b' } } });
    expect(update.status).toBeGreaterThanOrEqual(400);
    expect(update.status).toBeLessThan(500);
    expectErrorBody(update.body);
  });

  it('refuses a body nested deeper than 32 levels with 422, also with an Idempotency-Key', async () => {
    const user = await registerUser(app());
    const deep = `{"user":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    for (const headers of [{}, { 'idempotency-key': unique('deep') }]) {
      const response = await raw(app(), {
        method: 'POST',
        url: '/api/users/login',
        headers: { 'content-type': 'application/json', authorization: `Token ${user.token}`, ...headers },
        payload: deep,
      });
      expect(response.status).toBe(422);
      expect(response.json()).toEqual({ errors: { body: ['is nested too deeply (maximum is 32 levels)'] } });
    }
    const shallowEnough = `{"article":{"title":"t","description":"d","body":"b","tagList":${'['.repeat(29)}${']'.repeat(29)}}}`;
    const response = await raw(app(), {
      method: 'POST',
      url: '/api/articles',
      headers: { 'content-type': 'application/json', authorization: `Token ${user.token}` },
      payload: shallowEnough,
    });
    // 32 levels are parsed; the schema then judges the content.
    expect(response.status).toBe(422);
    expect(Object.keys((response.json() as { errors: object }).errors)).toEqual(['tagList']);
  });

  it('answers a body in another media type with a contract error, not a framework default', async () => {
    const response = await raw(app(), {
      method: 'POST',
      url: '/api/users',
      headers: { 'content-type': 'application/xml' },
      payload: '<user/>',
    });
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
    expect(response.headers['content-type']).toBe(JSON_TYPE);
    expectErrorBody(response.json());
  });

  // ---------------------------------------------------------------- content type

  it('sends application/json; charset=utf-8 on successes and errors alike', async () => {
    const user = await registerUser(app());
    const article = await createArticle(app(), user.token);
    const responses = [
      await call(app(), 'POST', '/api/users', {
        body: { user: { username: unique(), email: `${unique()}@example.com`, password: 'password123' } },
      }),
      await call(app(), 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } }),
      await call(app(), 'GET', '/api/user', { token: user.token }),
      await call(app(), 'GET', '/api/tags'),
      await call(app(), 'GET', '/api/articles'),
      await call(app(), 'GET', `/api/articles/${article.slug}`),
      await call(app(), 'GET', `/api/profiles/${user.username}`),
      await call(app(), 'GET', '/api/user'),
      await call(app(), 'POST', '/api/users/login', { body: { user: { email: user.email, password: 'wrong-password' } } }),
      await call(app(), 'POST', '/api/users', { body: { user: {} } }),
      await call(app(), 'POST', '/api/users', {
        body: { user: { username: user.username, email: `${unique()}@example.com`, password: 'password123' } },
      }),
      await call(app(), 'GET', `/api/profiles/${unique('ghost')}`),
    ];
    expect(responses.map((response) => response.status)).toEqual([201, 200, 200, 200, 200, 200, 200, 401, 401, 422, 409, 404]);
    for (const response of responses) expect(response.headers['content-type']).toBe(JSON_TYPE);
  });

  // ---------------------------------------------------------------- CORS

  it('answers a CORS preflight allowing the Authorization and Content-Type headers', async () => {
    for (const [url, method] of [
      ['/api/user', 'PUT'],
      ['/api/articles', 'POST'],
      ['/api/articles/some-slug/favorite', 'DELETE'],
    ] as const) {
      const response = await raw(app(), {
        method: 'OPTIONS',
        url,
        headers: {
          origin: ORIGIN,
          'access-control-request-method': method,
          'access-control-request-headers': 'authorization,content-type',
        },
      });
      expect(response.status, url).toBeGreaterThanOrEqual(200);
      expect(response.status, url).toBeLessThan(300);
      expect([ORIGIN, '*'], url).toContain(response.headers['access-control-allow-origin']);
      const allowedHeaders = String(response.headers['access-control-allow-headers'])
        .toLowerCase()
        .split(/\s*,\s*/);
      expect(allowedHeaders, url).toEqual(expect.arrayContaining(['authorization', 'content-type']));
      const allowedMethods = String(response.headers['access-control-allow-methods'])
        .toUpperCase()
        .split(/\s*,\s*/);
      expect(allowedMethods, url).toContain(method);
    }
  });

  it('allows any origin by default on ordinary responses', async () => {
    for (const origin of [ORIGIN, 'http://localhost:4200']) {
      const response = await raw(app(), { method: 'GET', url: '/api/tags', headers: { origin } });
      expect(response.status).toBe(200);
      expect([origin, '*']).toContain(response.headers['access-control-allow-origin']);
    }
  });

  it('lets a browser on another origin read error responses too, 401 included', async () => {
    const user = await registerUser(app());
    const withOrigin = (headers: Record<string, string> = {}) => ({ origin: ORIGIN, ...headers });
    const requests: Array<[string, InjectOptions]> = [
      ['401 missing', { method: 'GET', url: '/api/user', headers: withOrigin() }],
      ['401 invalid', { method: 'GET', url: '/api/user', headers: withOrigin({ authorization: 'Token not.a.jwt' }) }],
      ['401 optional route', { method: 'GET', url: '/api/articles', headers: withOrigin({ authorization: 'Token not.a.jwt' }) }],
      [
        '401 credentials',
        {
          method: 'POST',
          url: '/api/users/login',
          headers: withOrigin(),
          payload: { user: { email: user.email, password: 'wrong-password' } },
        },
      ],
      ['422', { method: 'POST', url: '/api/users', headers: withOrigin(), payload: { user: {} } }],
      ['404', { method: 'GET', url: `/api/profiles/${unique('ghost')}`, headers: withOrigin() }],
      ['405', { method: 'PATCH', url: '/api/user', headers: withOrigin() }],
      ['400', { method: 'POST', url: '/api/users', headers: withOrigin({ 'content-type': 'application/json' }), payload: '{bad' }],
    ];
    const unreadable: string[] = [];
    for (const [label, options] of requests) {
      const response = await raw(app(), options);
      expect(response.status, label).toBeGreaterThanOrEqual(400);
      const allowed = response.headers['access-control-allow-origin'];
      if (allowed !== ORIGIN && allowed !== '*') unreadable.push(`${label} (${response.status})`);
      // A 405 says which methods would do: the page may read that too.
      if (response.status === 405) expect(String(response.headers['access-control-expose-headers'])).toMatch(/\ballow\b/i);
    }
    // Without Access-Control-Allow-Origin the browser hides the body, so a client cannot tell "log in again" apart.
    expect(unreadable).toEqual([]);
  });

  it('answers an OPTIONS request without Origin with a contract body, never a framework default', async () => {
    const response = await raw(app(), { method: 'OPTIONS', url: '/api/user' });
    if (response.status >= 400) {
      expect(response.headers['content-type']).toBe(JSON_TYPE);
      expectErrorBody(response.json());
    } else {
      expect(response.status).toBeLessThan(300);
    }
  });

  it('allows only the configured origins when CORS_ORIGINS is set', async () => {
    const scratch = await createScratchDatabase(ctx().kind);
    const strict = await buildApp(testConfig(scratch.url, { CORS_ORIGINS: 'https://allowed.example' }));
    try {
      const allowed = await raw(strict, { method: 'GET', url: '/api/tags', headers: { origin: 'https://allowed.example' } });
      expect(allowed.status).toBe(200);
      expect(allowed.headers['access-control-allow-origin']).toBe('https://allowed.example');
      const other = await raw(strict, { method: 'GET', url: '/api/tags', headers: { origin: 'https://evil.example' } });
      expect(other.headers['access-control-allow-origin']).toBeUndefined();
      const preflight = await raw(strict, {
        method: 'OPTIONS',
        url: '/api/user',
        headers: {
          origin: 'https://evil.example',
          'access-control-request-method': 'PUT',
          'access-control-request-headers': 'authorization',
        },
      });
      expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await strict.close();
      await scratch.drop();
    }
  });

  // ---------------------------------------------------------------- unexpected faults

  it('answers an unexpected database fault with 500 {"errors":{"server":["internal error"]}} and leaks nothing', async () => {
    // A second app on a database of its own, broken on purpose: the tags tables are dropped under it.
    const scratch = await createScratchDatabase(ctx().kind);
    const broken = await buildApp(testConfig(scratch.url));
    try {
      await broken.db.schema.dropTable('article_tags').execute();
      await broken.db.schema.dropTable('tags').execute();
      const response = await raw(broken, { method: 'GET', url: '/api/tags' });
      expect(response.status).toBe(500);
      expect(response.json()).toEqual({ errors: { server: ['internal error'] } });
      expect(response.headers['content-type']).toBe(JSON_TYPE);
      expect(response.text).not.toMatch(/tags|sql|select|stack|at \w/i);

      // A write that fails the same way inside a handler.
      const author = await registerUser(broken);
      const create = await call(broken, 'POST', '/api/articles', {
        token: author.token,
        body: { article: { title: 'Broken', description: 'd', body: 'b', tagList: ['x'] } },
      });
      expect(create.status).toBe(500);
      expect(create.body).toEqual({ errors: { server: ['internal error'] } });
    } finally {
      await broken.close();
      await scratch.drop();
    }
  });
});
