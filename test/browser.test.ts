import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, type ScratchDatabase, testConfig } from './support/app.js';

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
if (missing !== null && !process.env.CI) console.warn(`\n[conduit] browser test SKIPPED: ${missing}\n`);

describe.skipIf(missing !== null && !process.env.CI)('API reference in headless Chromium', () => {
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

    // One tag in use, so the page must show data from this server, not just an empty list.
    const user = { username: 'docsreader', email: 'docsreader@example.com', password: 'password123' };
    const registered = await app.inject({ method: 'POST', url: '/api/users', payload: { user } });
    const created = await app.inject({
      method: 'POST',
      url: '/api/articles',
      headers: { authorization: `Token ${registered.json().user.token}` },
      payload: { article: { title: 'Here be', description: 'd', body: 'b', tagList: [TAG] } },
    });
    expect(created.statusCode).toBe(201);

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

  it('lists the endpoints, and "Try it out" on GET /tags calls /api/tags and shows the answer', async () => {
    const page = await context!.newPage();
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
    const document = (await app!.inject({ method: 'GET', url: '/api/openapi.json' })).json() as { paths: Record<string, object> };
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
