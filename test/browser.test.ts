import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, type ScratchDatabase, testConfig } from './support/app.js';
import { createArticle, registerUser, unique } from './support/client.js';

const CHROMIUM = '/usr/bin/chromium';
// The machine has no network: without these Chromium waits on update, sync and QUIC probes that never answer.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const TAG = 'dragons';

const missing = existsSync(CHROMIUM) ? null : `${CHROMIUM} not found (apt-get install -y chromium)`;
// Locally a missing browser is a reason to skip, said out loud; in CI it must fail, never pass unseen.
const skipped = missing !== null && !process.env.CI;
if (skipped) console.warn(`\n[conduit] browser test SKIPPED: ${missing}\n`);

interface BrowserSuite {
  app: FastifyInstance;
  /** Where the API listens, without a trailing slash. */
  origin: string;
  context: BrowserContext;
}

/**
 * Hooks that start the API on a fresh SQLite database and open Chromium with an empty profile, so an empty HTTP cache,
 * for the suite that calls this.
 */
function browserSuite(): () => BrowserSuite {
  let scratch: ScratchDatabase | undefined;
  let app: FastifyInstance | undefined;
  let context: BrowserContext | undefined;
  let profileDir: string | undefined;
  let origin = '';

  beforeAll(async () => {
    if (missing !== null) throw new Error(`${missing}; CI must install it`);
    scratch = await createScratchDatabase('sqlite');
    app = await buildApp(testConfig(scratch.url));
    await app.listen({ port: 0, host: '127.0.0.1' });
    origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    profileDir = mkdtempSync(path.join(tmpdir(), 'conduit-chromium-'));
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
    });
  });

  afterAll(async () => {
    await context?.close();
    if (profileDir) rmSync(profileDir, { recursive: true, force: true });
    await app?.close();
    await scratch?.drop();
  });

  return () => ({ app: app!, origin, context: context! });
}

describe.skipIf(skipped)('API reference in headless Chromium', () => {
  const suite = browserSuite();

  beforeAll(async () => {
    // One tag in use, so the page must show data from this server, not just an empty list.
    const user = { username: 'docsreader', email: 'docsreader@example.com', password: 'password123' };
    const registered = await suite().app.inject({ method: 'POST', url: '/api/users', payload: { user } });
    const created = await suite().app.inject({
      method: 'POST',
      url: '/api/articles',
      headers: { authorization: `Token ${registered.json().user.token}` },
      payload: { article: { title: 'Here be', description: 'd', body: 'b', tagList: [TAG] } },
    });
    expect(created.statusCode).toBe(201);
  });

  it('lists the endpoints, and "Try it out" on GET /tags calls /api/tags and shows the answer', async () => {
    const { app, origin, context } = suite();
    const page = await context.newPage();
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(`${origin}/`)) elsewhere.push(request.url());
    });
    // The page's Content-Security-Policy must allow everything it does: Chromium reports each refusal here.
    const refusedByPolicy: string[] = [];
    page.on('console', (message) => {
      if (message.text().includes('Content Security Policy')) refusedByPolicy.push(message.text());
    });

    await page.goto(`${origin}/docs`);
    const operations = page.locator('.opblock-summary-path');
    // Every operation of the document the page is drawn from: the RealWorld spec's 19, the index at /api, and ours.
    const document = (await app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as { paths: Record<string, object> };
    const documented = Object.values(document.paths).reduce(
      (sum, item) => sum + Object.keys(item).filter((key) => ['get', 'post', 'put', 'delete'].includes(key)).length,
      0,
    );
    expect(documented).toBeGreaterThan(20);
    await expect.poll(() => operations.count(), { timeout: 10_000 }).toBe(documented);
    const listed = await operations.evaluateAll((nodes) => nodes.map((node) => node.getAttribute('data-path')));
    expect(listed).toEqual(
      expect.arrayContaining(['/', '/users/login', '/user', '/articles/{slug}/comments/{id}', '/tags', '/events', '/webhooks']),
    );

    const getTags = page.locator('.opblock-get', { has: page.locator('[data-path="/tags"]') });
    await getTags.locator('.opblock-summary').click();
    await getTags.getByRole('button', { name: 'Try it out' }).click();
    const answered = page.waitForResponse((response) => new URL(response.url()).pathname === '/api/tags');
    await getTags.getByRole('button', { name: 'Execute' }).click();
    const response = await answered;
    expect(response.url()).toBe(`${origin}/api/tags`);

    const answer = getTags.locator('.live-responses-table tr.response');
    await expect.poll(() => answer.locator('.response-col_status').innerText()).toBe('200');
    const shownBody = await answer.locator('.response-col_description .highlight-code pre').innerText();
    expect(JSON.parse(shownBody)).toEqual({ tags: [TAG] });
    expect(await getTags.locator('.request-url pre').innerText()).toBe(`${origin}/api/tags`);
    // Swagger UI's assets come from this server, never from a CDN.
    expect(elsewhere).toEqual([]);
    expect(refusedByPolicy).toEqual([]);
  }, 30_000);
});

/** What the frontend page below offers the test: each call does what a RealWorld frontend does on that screen. */
interface Frontend {
  signIn(email: string, password: string): Promise<void>;
  publish(article: { title: string; description: string; body: string; tagList: string[] }): Promise<void>;
  showTags(): Promise<void>;
  showArticles(): Promise<void>;
}

declare global {
  interface Window {
    conduit: Frontend;
  }
}

/**
 * A frontend as the RealWorld apps are: its own origin, calling the API on another with fetch's default cache mode,
 * the token in the Authorization header on every request once signed in (Angular's interceptor), and a
 * Content-Type only on requests with a body, so that anonymous reads are simple CORS requests.
 */
const FRONTEND_PAGE = `<!doctype html>
<meta charset="utf-8">
<title>Conduit</title>
<ul id="tags"></ul>
<ol id="articles"></ol>
<script>
  const api = new URL(location.href).searchParams.get('api');
  let token = null;
  async function call(path, init = {}) {
    const headers = {};
    if (init.body) headers['content-type'] = 'application/json';
    if (token) headers.authorization = 'Token ' + token;
    const response = await fetch(api + path, { ...init, headers });
    if (!response.ok) throw new Error((init.method || 'GET') + ' ' + path + ': ' + response.status);
    return response.json();
  }
  function show(listId, texts) {
    document.getElementById(listId).replaceChildren(...texts.map((text) => Object.assign(document.createElement('li'), { textContent: text })));
  }
  window.conduit = {
    async signIn(email, password) {
      token = (await call('/api/users/login', { method: 'POST', body: JSON.stringify({ user: { email, password } }) })).user.token;
    },
    async publish(article) {
      await call('/api/articles', { method: 'POST', body: JSON.stringify({ article }) });
    },
    async showTags() {
      show('tags', (await call('/api/tags')).tags);
    },
    async showArticles() {
      show('articles', (await call('/api/articles?limit=10&offset=0')).articles.map((article) => article.title));
    },
  };
</script>
`;

describe.skipIf(skipped)('a frontend on another origin, in headless Chromium, sees the writes', () => {
  const suite = browserSuite();
  let frontendOrigin = '';
  const frontend = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(FRONTEND_PAGE);
  });

  beforeAll(async () => {
    await new Promise<void>((listening) => frontend.listen(0, '127.0.0.1', listening));
    // localhost and 127.0.0.1 are different sites, as a frontend and its API usually are.
    frontendOrigin = `http://localhost:${(frontend.address() as AddressInfo).port}`;
    // Something to list before the writes under test, as on any live site.
    const regular = await registerUser(suite().app, 'regular');
    await createArticle(suite().app, regular.token, { tagList: [unique('old')] });
  });

  afterAll(async () => {
    // Chromium keeps its connections open; they would hold close() up.
    frontend.closeAllConnections();
    await new Promise((closed) => frontend.close(closed));
  });

  async function openFrontend(): Promise<Page> {
    const page = await suite().context.newPage();
    await page.goto(`${frontendOrigin}/?api=${encodeURIComponent(suite().origin)}`);
    return page;
  }

  const shown = (page: Page, listId: string) => page.locator(`#${listId} li`).allInnerTexts();

  it("shows a new tag on the author's tag list right after the article that introduced it", async () => {
    const author = await registerUser(suite().app, 'author');
    const tag = unique('new');
    const page = await openFrontend();
    await page.evaluate(({ email, password }) => window.conduit.signIn(email, password), author);
    await page.evaluate(() => window.conduit.showTags());
    const before = await shown(page, 'tags');
    expect(before.length).toBeGreaterThan(0);
    expect(before).not.toContain(tag);

    const article = { title: unique('Title '), description: 'd', body: 'b', tagList: [tag] };
    await page.evaluate((introducing) => window.conduit.publish(introducing), article);
    await page.evaluate(() => window.conduit.showTags());
    expect(await shown(page, 'tags')).toContain(tag);
  });

  it('shows an anonymous reader an article published elsewhere on their next look at the list', async () => {
    const page = await openFrontend();
    await page.evaluate(() => window.conduit.showArticles());
    const before = await shown(page, 'articles');
    expect(before.length).toBeGreaterThan(0);

    const writer = await registerUser(suite().app, 'writer');
    const { title } = await createArticle(suite().app, writer.token);
    await page.evaluate(() => window.conduit.showArticles());
    expect(await shown(page, 'articles')).toEqual([title, ...before].slice(0, 10));

    // Not because the browser kept nothing: it keeps its copy and asks with that copy's ETag before using it.
    const revalidation = page.waitForRequest((request) => new URL(request.url()).pathname === '/api/articles');
    await page.evaluate(() => window.conduit.showArticles());
    expect((await (await revalidation).allHeaders())['if-none-match']).toMatch(/^"[\w-]+"$/);
  });
});
