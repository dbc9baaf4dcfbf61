import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, type ScratchDatabase, testConfig } from './support/app.js';

/** What every JSON answer carries, errors and refusals included. */
const API_HEADERS = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none';frame-ancestors 'none'",
  'strict-transport-security': 'max-age=31536000',
};

describe('security headers', () => {
  let scratch: ScratchDatabase | undefined;
  let app: FastifyInstance;

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    app = await buildApp(testConfig(scratch.url, { RATE_LIMIT_MAX: '2' }));
  });

  afterAll(async () => {
    await app?.close();
    await scratch?.drop();
  });

  it('are on answers, errors and refusals alike', async () => {
    // With two requests allowed per address, the third from one address is refused.
    const answers = [
      await app.inject({ url: '/api/tags', remoteAddress: '192.0.2.1' }),
      await app.inject({ url: '/api/user', remoteAddress: '192.0.2.1' }),
      await app.inject({ url: '/api/tags', remoteAddress: '192.0.2.1' }),
      await app.inject({ url: '/api/no-such-route', remoteAddress: '192.0.2.2' }),
    ];
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 401, 429, 404]);
    for (const answer of answers) {
      expect(answer.headers, String(answer.statusCode)).toMatchObject(API_HEADERS);
      expect(answer.headers['x-powered-by']).toBeUndefined();
    }
  });

  it('are on answers the router gives before routing, with the CORS headers of any other error', async () => {
    const send = (url: string, remoteAddress: string) => app.inject({ url, remoteAddress, headers: { origin: 'https://app.example.com' } });
    const notFound = await send('/api/no-such-route', '192.0.2.5');
    const refused = [await send('/api/articles/%E0%A4%A', '192.0.2.6'), await send(`/api/articles/${'a'.repeat(2000)}`, '192.0.2.7')];
    expect(notFound.statusCode).toBe(404);
    expect(refused.map((answer) => [answer.statusCode, answer.json()])).toEqual([
      [400, { errors: { url: ['is malformed'] } }],
      [414, { errors: { url: ['is too long'] } }],
    ]);
    // All but the headers that differ from one answer to the next: CORS and rate limit ones included.
    const comparable = ({ date: _date, 'content-length': _length, 'x-request-id': _id, ...rest }: Record<string, unknown>) => rest;
    for (const answer of refused) {
      const label = String(answer.statusCode);
      expect(answer.headers['x-request-id'], label).toBeDefined();
      expect(comparable(answer.headers), label).toEqual(comparable(notFound.headers));
      expect(answer.headers, label).toMatchObject({ ...API_HEADERS, 'access-control-allow-origin': 'https://app.example.com' });
    }
  });

  it('give /docs a policy that lets the page run its own scripts and call only this server', async () => {
    for (const url of ['/docs', '/docs/static/swagger-ui-bundle.js']) {
      const response = await app.inject({ url, remoteAddress: '192.0.2.3' });
      expect(response.statusCode, url).toBe(200);
      const policy = String(response.headers['content-security-policy']);
      expect(policy, url).toContain("default-src 'self'");
      expect(policy, url).toContain("frame-ancestors 'none'");
      expect(policy, url).not.toContain('unsafe-eval');
      expect(policy, url).not.toMatch(/script-src[^;]*unsafe-inline/);
      expect(response.headers['x-frame-options'], url).toBe('DENY');
    }
  });

  it('leave CORS preflights working', async () => {
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/articles',
      remoteAddress: '192.0.2.4',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example.com');
  });
});
