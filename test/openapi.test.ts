import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, type ScratchDatabase, testConfig } from './support/app.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Found the same way as by scripts/conformance.mjs.
const SPEC_FILE = path.join(path.resolve(ROOT, process.env.REALWORLD_DIR || '../shared/realworld'), 'openapi.yml');

type Node = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** Follows local `$ref`s (`#/components/...`) until a node is not a reference. */
function deref(node: Node | undefined, root: Node): Node | undefined {
  let current = node;
  while (current && typeof current.$ref === 'string') {
    const ref: string = current.$ref;
    if (!ref.startsWith('#/')) throw new Error(`only local $refs are expected, got ${ref}`);
    current = ref
      .slice(2)
      .split('/')
      .reduce<Node | undefined>((parent, key) => parent?.[key.replaceAll('~1', '/').replaceAll('~0', '~')], root);
    if (current === undefined) throw new Error(`unresolvable $ref ${ref}`);
  }
  return current;
}

/** The types a schema admits, with every nullable encoding (`type` arrays, `nullable`, `anyOf` null) read alike. */
function typesOf(schema: Node, root: Node): string[] {
  const types = new Set<string>();
  if (typeof schema.type === 'string') types.add(schema.type);
  if (Array.isArray(schema.type)) for (const type of schema.type) types.add(type);
  if (schema.nullable === true) types.add('null');
  for (const member of [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) {
    for (const type of typesOf(deref(member, root) ?? {}, root)) types.add(type);
  }
  return [...types].sort();
}

/** The object branch of a nullable union, where property names and requirements live. */
function objectPart(schema: Node, root: Node): Node {
  const members = [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])].map((member) => deref(member, root) ?? {});
  return members.find((member) => member.properties !== undefined) ?? schema;
}

const sorted = (values: unknown): string[] => (Array.isArray(values) ? values.map(String).sort() : []);
const same = (a: string[], b: string[]) => a.join(',') === b.join(',');

/** Every way `ours` differs from `theirs` in types, property names, required lists, items and nested objects. */
function schemaDifferences(theirs: Node, ours: Node, specRoot: Node, ourRoot: Node, where: string): string[] {
  const spec = objectPart(deref(theirs, specRoot) ?? {}, specRoot);
  const mine = objectPart(deref(ours, ourRoot) ?? {}, ourRoot);
  const problems: string[] = [];
  const specTypes = typesOf(spec, specRoot);
  const myTypes = typesOf(mine, ourRoot);
  if (specTypes.length > 0 && !same(specTypes, myTypes)) {
    problems.push(`${where}: type ${myTypes.join('|') || '(none)'} instead of ${specTypes.join('|')}`);
  }
  const specNames = Object.keys(spec.properties ?? {}).sort();
  const myNames = withoutAdditions(where, Object.keys(mine.properties ?? {}).sort());
  if (!same(specNames, myNames)) problems.push(`${where}: properties [${myNames}] instead of [${specNames}]`);
  const myRequired = withoutAdditions(where, sorted(mine.required));
  if (!same(sorted(spec.required), myRequired)) {
    problems.push(`${where}: required [${myRequired}] instead of [${sorted(spec.required)}]`);
  }
  for (const name of specNames.filter((name) => myNames.includes(name))) {
    problems.push(...schemaDifferences(spec.properties[name], mine.properties[name], specRoot, ourRoot, `${where}.${name}`));
  }
  if (spec.items !== undefined) {
    problems.push(...schemaDifferences(spec.items, mine.items ?? {}, specRoot, ourRoot, `${where}[]`));
  }
  if (typeof spec.additionalProperties === 'object') {
    const myAdditional = typeof mine.additionalProperties === 'object' ? mine.additionalProperties : {};
    problems.push(...schemaDifferences(spec.additionalProperties, myAdditional, specRoot, ourRoot, `${where}{}`));
  }
  return problems;
}

const jsonSchemaOf = (holder: Node | undefined, root: Node): Node | undefined => deref(holder, root)?.content?.['application/json']?.schema;

/** HTTP's conditional request headers, which our document adds to the spec's operations (conditional-get.ts). */
const CONDITIONAL_HEADERS = new Set(['header:if-none-match', 'header:if-modified-since', 'header:if-match']);

/** `in:name` for each parameter, so a query `limit` and a path `limit` are not confused. */
const parameterKeys = (operation: Node, root: Node) =>
  (operation.parameters ?? [])
    .map((parameter: Node) => {
      const resolved = deref(parameter, root) ?? {};
      return `${resolved.in}:${resolved.name}`;
    })
    .filter((key: string) => !CONDITIONAL_HEADERS.has(key));

/**
 * What this server adds to the spec's own operations, none of it needed by a client written for the spec: optional
 * query parameters and headers, and answer fields such clients ignore. Anything else extra is still a difference.
 */
const LIFECYCLE_FIELDS = ['publishAt', 'publishedAt', 'status'];
/** What its author reads about a hide (CONTRACT.md, Moderation): absent for everyone else. */
const ARTICLE_FIELDS = [...LIFECYCLE_FIELDS, 'moderation'];
const ADDITIONS: Record<string, string[]> = {
  'GET /articles': ['query:cursor', 'query:q'],
  'GET /articles 200': ['nextCursor', 'partial'],
  'GET /articles 200.articles[]': ['snippet', ...ARTICLE_FIELDS],
  'GET /articles/feed': ['query:cursor'],
  // An optional header that lets the owner's device past a lock strangers put on the account (modules/users/devices.ts).
  'POST /users/login': ['header:known-device'],
  'GET /articles/feed 200': ['nextCursor'],
  'GET /articles/feed 200.articles[]': ARTICLE_FIELDS,
  'GET /articles/{slug}/comments 200.comments[]': ['moderation'],
  'POST /articles/{slug}/comments 201.comment': ['moderation'],
  // Every article object carries its lifecycle, and creating or editing one may set it (CONTRACT.md, Lifecycle).
  'POST /articles request.article': ['publishAt', 'status'],
  'PUT /articles/{slug} request.article': ['publishAt', 'status'],
  // The caller's role (CONTRACT.md, Moderation).
  ...Object.fromEntries(
    ['POST /users 201', 'POST /users/login 200', 'GET /user 200', 'PUT /user 200'].map((answer) => [`${answer}.user`, ['role']]),
  ),
  ...Object.fromEntries(
    [
      'POST /articles 201',
      'GET /articles/{slug} 200',
      'PUT /articles/{slug} 200',
      'POST /articles/{slug}/favorite 200',
      'DELETE /articles/{slug}/favorite 200',
    ].map((answer) => [`${answer}.article`, ARTICLE_FIELDS]),
  ),
  // A signed-in caller learns whether they block and mute the user (CONTRACT.md, Moderation).
  ...Object.fromEntries(
    ['GET /profiles/{username}', 'POST /profiles/{username}/follow', 'DELETE /profiles/{username}/follow'].map((answer) => [
      `${answer} 200.profile`,
      ['blocking', 'muting'],
    ]),
  ),
};
const withoutAdditions = (where: string, names: string[]) => names.filter((name) => !ADDITIONS[where]?.includes(name));

/** Every difference between the RealWorld spec and our document that a client would notice; empty when none. */
function compareWithSpec(spec: Node, doc: Node): string[] {
  const problems: string[] = [];
  // Our routes live under /api; the document may put that prefix in its server URL or in its paths.
  const base = new URL(doc.servers?.[0]?.url ?? '/', 'http://host').pathname.replace(/\/$/, '');
  for (const [specPath, specItem] of Object.entries<Node>(spec.paths)) {
    const fullPath = `/api${specPath}`;
    const ourItem: Node | undefined = fullPath.startsWith(base) ? doc.paths[fullPath.slice(base.length)] : undefined;
    for (const method of METHODS.filter((method) => specItem[method] !== undefined)) {
      const where = `${method.toUpperCase()} ${specPath}`;
      const theirs: Node = specItem[method];
      const ours: Node | undefined = ourItem?.[method];
      if (ours === undefined) {
        problems.push(`${where}: missing (looked for ${fullPath})`);
        continue;
      }

      // Clients generated from the spec name their methods after these; ours keep those names.
      if (ours.operationId !== theirs.operationId) {
        problems.push(`${where}: operationId ${ours.operationId} instead of ${theirs.operationId}`);
      }

      const specParameters = sorted(parameterKeys(theirs, spec));
      const myParameters = withoutAdditions(where, sorted(parameterKeys(ours, doc)));
      if (!same(specParameters, myParameters)) {
        problems.push(`${where}: parameters [${myParameters}] instead of [${specParameters}]`);
      }

      const specBody = jsonSchemaOf(theirs.requestBody, spec);
      const myBody = jsonSchemaOf(ours.requestBody, doc);
      if (specBody !== undefined && myBody === undefined) problems.push(`${where}: no request body`);
      if (specBody === undefined && myBody !== undefined) problems.push(`${where}: unexpected request body`);
      if (specBody !== undefined && myBody !== undefined) {
        problems.push(...schemaDifferences(specBody, myBody, spec, doc, `${where} request`));
      }

      for (const status of Object.keys(theirs.responses).filter((status) => status.startsWith('2'))) {
        const mine = ours.responses?.[status];
        if (mine === undefined) {
          problems.push(`${where}: no ${status} response (has ${Object.keys(ours.responses ?? {})})`);
          continue;
        }
        const specSchema = jsonSchemaOf(theirs.responses[status], spec);
        const mySchema = jsonSchemaOf(mine, doc);
        if (specSchema === undefined && mySchema !== undefined) problems.push(`${where}: ${status} has a body`);
        if (specSchema !== undefined && mySchema === undefined) problems.push(`${where}: ${status} has no body`);
        if (specSchema !== undefined && mySchema !== undefined) {
          problems.push(...schemaDifferences(specSchema, mySchema, spec, doc, `${where} ${status}`));
        }
      }

      // Required auth must be declared as the spec does; optional auth may add the empty requirement.
      const mySecurity = JSON.stringify(ours.security ?? []);
      if (theirs.security !== undefined && mySecurity !== JSON.stringify(theirs.security)) {
        problems.push(`${where}: security ${mySecurity} instead of ${JSON.stringify(theirs.security)}`);
      }
      // `[]` is OpenAPI's explicit "no token"; otherwise an empty requirement `{}` must be among the alternatives.
      const tokenMandatory = (ours.security ?? []).length > 0 && !mySecurity.includes('{}');
      if (theirs.security === undefined && tokenMandatory) {
        problems.push(`${where}: security ${mySecurity} makes a token mandatory`);
      }
    }
  }
  return problems;
}

/**
 * The error statuses each operation can answer with. Every route meets 400 (an undecodable URL), 429, 500 and 503;
 * token checks add 401, bodies 413 and 415 (and 400 and 422 for what the parser refuses), idempotency keys on POST
 * 409 and 422, and a failed schema 422. The rest are the route's own.
 */
const ANY = [400, 429, 500, 503];
const WITH_BODY = [...ANY, 413, 415, 422];
/** A signed-in write: the token (401), and the account leaving (403, users/auth.ts). */
const SIGNED_IN_WRITE = [...WITH_BODY, 401, 403];
const ERROR_STATUSES: Record<string, number[]> = {
  'POST /users': [...WITH_BODY, 409],
  'POST /users/login': [...WITH_BODY, 401, 409],
  'GET /user': [...ANY, 401],
  'PUT /user': [...SIGNED_IN_WRITE, 409, 412],
  'DELETE /user': [...WITH_BODY, 401],
  'GET /user/deletion': [...ANY, 401, 404],
  'DELETE /user/deletion': [...WITH_BODY, 401],
  'GET /user/export': [...ANY, 401],
  'GET /profiles/{username}': [...ANY, 401, 404, 422],
  'POST /profiles/{username}/follow': [...SIGNED_IN_WRITE, 404, 409],
  'DELETE /profiles/{username}/follow': [...SIGNED_IN_WRITE, 404],
  'POST /profiles/{username}/block': [...SIGNED_IN_WRITE, 404, 409],
  'DELETE /profiles/{username}/block': [...SIGNED_IN_WRITE, 404],
  'POST /profiles/{username}/mute': [...SIGNED_IN_WRITE, 404, 409],
  'DELETE /profiles/{username}/mute': [...SIGNED_IN_WRITE, 404],
  'GET /articles': [...ANY, 401, 422],
  'POST /articles': [...SIGNED_IN_WRITE, 409],
  'GET /articles/feed': [...ANY, 401, 422],
  'GET /articles/{slug}': [...ANY, 401, 404, 422],
  'PUT /articles/{slug}': [...SIGNED_IN_WRITE, 404, 409, 412],
  'DELETE /articles/{slug}': [...SIGNED_IN_WRITE, 404, 412],
  'POST /articles/{slug}/favorite': [...SIGNED_IN_WRITE, 404, 409],
  'DELETE /articles/{slug}/favorite': [...SIGNED_IN_WRITE, 404],
  'GET /articles/{slug}/comments': [...ANY, 401, 404, 422],
  'POST /articles/{slug}/comments': [...SIGNED_IN_WRITE, 404, 409],
  'DELETE /articles/{slug}/comments/{id}': [...SIGNED_IN_WRITE, 404],
  'GET /articles/{slug}/revisions': [...ANY, 401, 404, 422],
  'GET /articles/{slug}/revisions/{id}': [...ANY, 401, 404, 422],
  'POST /articles/{slug}/revisions/{id}/restore': [...SIGNED_IN_WRITE, 404, 409, 412],
  'GET /tags': ANY,
  'GET /user/articles': [...ANY, 401, 422],
  'GET /notifications': [...ANY, 401, 422],
  'POST /notifications/read': [...SIGNED_IN_WRITE, 409],
  'POST /webhooks': [...SIGNED_IN_WRITE, 409],
  'GET /webhooks': [...ANY, 401],
  'GET /webhooks/{id}': [...ANY, 401, 404, 422],
  'DELETE /webhooks/{id}': [...SIGNED_IN_WRITE, 404],
  'POST /webhooks/{id}/rotate-secret': [...SIGNED_IN_WRITE, 404, 409],
  'POST /webhooks/{id}/enable': [...SIGNED_IN_WRITE, 404, 409],
  'GET /webhooks/{id}/deliveries': [...ANY, 401, 404, 422],
  'POST /webhooks/{id}/replay': [...SIGNED_IN_WRITE, 404, 409],
  'GET /events': [...ANY, 401, 404, 422],
  'POST /articles/{slug}/comments/{id}/hide': [...SIGNED_IN_WRITE, 404, 409],
  'POST /articles/{slug}/comments/{id}/unhide': [...SIGNED_IN_WRITE, 404, 409],
  ...Object.fromEntries(
    [
      'articles/{slug}/hide',
      'articles/{slug}/unhide',
      'comments/{id}/hide',
      'comments/{id}/unhide',
      'users/{username}/suspend',
      'users/{username}/unsuspend',
    ].map((path) => [`POST /moderation/${path}`, [...SIGNED_IN_WRITE, 404, 409]]),
  ),
  'PUT /moderation/users/{username}': [...SIGNED_IN_WRITE, 404],
  'GET /moderation/audit-log': [...ANY, 401, 403, 422],
  'POST /articles/{slug}/report': [...SIGNED_IN_WRITE, 404, 409],
  'POST /articles/{slug}/comments/{id}/report': [...SIGNED_IN_WRITE, 404, 409],
  'POST /profiles/{username}/report': [...SIGNED_IN_WRITE, 404, 409],
  'GET /moderation/reports': [...ANY, 401, 403, 422],
  'POST /moderation/reports/{id}/resolve': [...SIGNED_IN_WRITE, 404, 409],
  'POST /moderation/reports/{id}/dismiss': [...SIGNED_IN_WRITE, 404, 409],
  'GET /user/moderation': [...ANY, 401, 422],
  'POST /user/moderation/{id}/appeal': [...SIGNED_IN_WRITE, 404, 409],
  'GET /': ANY,
  ...Object.fromEntries(
    ['rss', 'atom', 'json'].flatMap((format) => [
      [`GET /feeds/articles.${format}`, ANY],
      [`GET /feeds/authors/{username}/articles.${format}`, [...ANY, 404, 422]],
      [`GET /feeds/tags/{tag}/articles.${format}`, [...ANY, 404, 422]],
    ]),
  ),
};

/** The contract's error body, `{"errors": {"field": ["message", ...]}}`, written out independently of src/schemas.ts. */
const ERROR_BODY = {
  type: 'object',
  required: ['errors'],
  properties: { errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } } },
};

/** `METHOD /path` and the operation, for every operation in a document. */
const operationsOf = (doc: Node): Array<[string, Node]> =>
  Object.entries<Node>(doc.paths).flatMap(([where, item]) =>
    METHODS.filter((method) => item[method]).map((method): [string, Node] => [`${method.toUpperCase()} ${where}`, item[method]]),
  );

describe('OpenAPI document', () => {
  let scratch: ScratchDatabase | undefined;
  let app: FastifyInstance | undefined;
  let doc: Node;
  const spec: Node = parse(readFileSync(SPEC_FILE, 'utf8'));

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    app = await buildApp(testConfig(scratch.url));
    const response = await app.inject({ method: 'GET', url: '/api/openapi.json' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    doc = response.json();
  });
  afterAll(async () => {
    await app?.close();
    await scratch?.drop();
  });

  it('is OpenAPI 3.1 with a relative server, so it works on any host and port', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.servers).toHaveLength(1);
    expect(doc.servers[0].url).toMatch(/^\//);
    expect(doc.components.securitySchemes.Token).toMatchObject({ type: 'apiKey', in: 'header', name: 'Authorization' });
  });

  it('has every path and method of the RealWorld spec with the same parameters, bodies, responses and security', () => {
    const operations = Object.values<Node>(spec.paths).flatMap((item) => METHODS.filter((method) => item[method]));
    expect(operations).toHaveLength(19);
    expect(compareWithSpec(spec, doc)).toEqual([]);
  });

  it('tags and summarises every operation, and leaves out the documentation routes themselves', () => {
    const declaredTags = doc.tags.map((tag: Node) => tag.name);
    for (const [ourPath, item] of Object.entries<Node>(doc.paths)) {
      expect(ourPath).not.toMatch(/docs|openapi/);
      for (const method of METHODS.filter((method) => item[method])) {
        const operation = item[method];
        expect(operation.summary, `${method} ${ourPath}`).toEqual(expect.any(String));
        expect(operation.tags, `${method} ${ourPath}`).toHaveLength(1);
        expect(declaredTags).toContain(operation.tags[0]);
      }
    }
  });

  it('says "no token" where a token is ignored: registration, login, the tag list and the index', () => {
    // The comparison with the spec lets an operation the spec leaves open accept an optional token; these take none.
    const operations = Object.fromEntries(operationsOf(doc));
    for (const where of ['POST /users', 'POST /users/login', 'GET /tags', 'GET /']) {
      expect(operations[where]?.security, where).toEqual([]);
    }
  });

  it('requires no parameter that has a default, shows every default, and requires every path parameter', () => {
    for (const [where, operation] of operationsOf(doc)) {
      for (const parameter of (operation.parameters ?? []).map((parameter: Node) => deref(parameter, doc)!)) {
        const name = `${where} ${parameter.in}:${parameter.name}`;
        if (parameter.schema?.default !== undefined) expect(parameter.required, name).toBe(false);
        if (parameter.in === 'path') expect(parameter.required, name).toBe(true);
      }
    }
    for (const where of ['/articles', '/articles/feed']) {
      const paging = doc.paths[where].get.parameters.filter((parameter: Node) => ['limit', 'offset'].includes(parameter.name));
      expect(paging, where).toEqual([
        expect.objectContaining({ in: 'query', name: 'limit', required: false, schema: expect.objectContaining({ default: 20 }) }),
        expect.objectContaining({ in: 'query', name: 'offset', required: false, schema: expect.objectContaining({ default: 0 }) }),
      ]);
    }
  });

  it('lists without limit or offset, as the document allows', async () => {
    const response = await app!.inject({ method: 'GET', url: '/api/articles' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
  });

  it('documents every error status of every operation, each with the error body', () => {
    const operations = operationsOf(doc);
    expect(operations.map(([where]) => where).sort()).toEqual(Object.keys(ERROR_STATUSES).sort());
    for (const [where, operation] of operations) {
      const errors = Object.keys(operation.responses).filter((status) => Number(status) >= 400);
      const numerically = (a: number, b: number) => a - b;
      expect(errors.map(Number).sort(numerically), where).toEqual([...ERROR_STATUSES[where]!].sort(numerically));
      for (const status of errors) {
        expect(operation.responses[status].description, `${where} ${status}`).toEqual(expect.any(String));
        expect(jsonSchemaOf(operation.responses[status], doc), `${where} ${status}`).toMatchObject(ERROR_BODY);
      }
    }
  });

  it('documents conditional GET on every read but the streams, and If-Match on the writes that take it', () => {
    for (const [where, operation] of operationsOf(doc)) {
      const headers = (operation.parameters ?? [])
        .filter((parameter: Node) => parameter.in === 'header')
        .map((parameter: Node) => parameter.name);
      if (where.startsWith('GET ') && !['GET /events', 'GET /user/export'].includes(where)) {
        expect(Object.keys(operation.responses['200'].headers), where).toEqual(expect.arrayContaining(['ETag', 'Cache-Control']));
        expect(operation.responses['304'], where).toMatchObject({ headers: { ETag: expect.any(Object) } });
        expect(operation.responses['304'].content, where).toBeUndefined();
        expect(headers, where).toContain('if-none-match');
      } else {
        expect(operation.responses['304'], where).toBeUndefined();
      }
      expect(headers.includes('if-modified-since'), where).toBe(where === 'GET /profiles/{username}');
      const takesIfMatch = [
        'PUT /articles/{slug}',
        'DELETE /articles/{slug}',
        'POST /articles/{slug}/revisions/{id}/restore',
        'PUT /user',
      ].includes(where);
      expect(headers.includes('if-match'), where).toBe(takesIfMatch);
      expect(operation.responses['412'] !== undefined, where).toBe(takesIfMatch);
    }
    expect(doc.paths['/profiles/{username}'].get.responses['200'].headers['Last-Modified']).toBeDefined();
    expect(doc.paths['/articles/{slug}'].put.responses['200'].headers.ETag).toBeDefined();
    expect(doc.paths['/tags'].get.responses['200'].headers.Vary).toBeUndefined();
    expect(doc.paths['/articles'].get.responses['200'].headers.Vary).toBeDefined();
  });

  it('the comparison catches a missing route, field, requirement or security', () => {
    const mutate = (change: (copy: Node) => void) => {
      const copy = structuredClone(doc);
      change(copy);
      return compareWithSpec(spec, copy);
    };
    const userSchema = (copy: Node) => copy.paths['/user'].get.responses['200'].content['application/json'].schema.properties.user;

    expect(mutate((copy) => delete copy.paths['/tags'])).toEqual(['GET /tags: missing (looked for /api/tags)']);
    expect(mutate((copy) => delete userSchema(copy).properties.bio)).toEqual([
      'GET /user 200.user: properties [email,image,token,username] instead of [bio,email,image,token,username]',
    ]);
    expect(mutate((copy) => (userSchema(copy).required = ['email']))).toEqual([
      'GET /user 200.user: required [email] instead of [bio,email,image,token,username]',
    ]);
    expect(mutate((copy) => (userSchema(copy).properties.image.type = 'string'))).toEqual([
      'GET /user 200.user.image: type string instead of null|string',
    ]);
    expect(mutate((copy) => delete copy.paths['/user'].put.security)).toEqual(['PUT /user: security [] instead of [{"Token":[]}]']);
    expect(mutate((copy) => (copy.paths['/users'].post.security = [{ Token: [] }]))).toEqual([
      'POST /users: security [{"Token":[]}] makes a token mandatory',
    ]);
    expect(mutate((copy) => (copy.paths['/tags'].get.operationId = 'ListTags'))).toEqual([
      'GET /tags: operationId ListTags instead of GetTags',
    ]);
    expect(
      mutate((copy) => {
        const article = copy.paths['/articles'].post.requestBody.content['application/json'].schema.properties.article;
        delete article.properties.tagList;
      }),
    ).toEqual(['POST /articles request.article: properties [body,description,title] instead of [body,description,tagList,title]']);
  });

  it('serves the interactive reference at /docs from local assets', async () => {
    const page = await app!.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('swagger-ui-bundle.js');
    expect(page.body).not.toMatch(/src="https?:/);
    const bundle = await app!.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
    const uiDocument = await app!.inject({ method: 'GET', url: '/docs/json' });
    expect(uiDocument.json()).toEqual(doc);
  });
});
