import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { deferPerTest, sqliteAppWith } from './support/app.js';

const { name, version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const defer = deferPerTest();

describe('API index at / and /api', () => {
  it('names the package and version and links to the docs, the OpenAPI document and the probes, each of which answers', async () => {
    const app = await sqliteAppWith(defer, {});
    for (const url of ['/', '/api', '/api/']) {
      const response = await app.inject({ url });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['content-type'], url).toBe('application/json; charset=utf-8');
      expect(response.json(), url).toEqual({
        name,
        version,
        links: { docs: '/docs', openapi: '/api/openapi.json', liveness: '/health/live', readiness: '/health/ready' },
      });
    }
    const { links } = (await app.inject({ url: '/api' })).json();
    for (const link of Object.values<string>(links)) expect((await app.inject({ url: link })).statusCode, link).toBe(200);
  });

  it('is documented once, as the index of the /api server', async () => {
    const app = await sqliteAppWith(defer, {});
    const doc = (await app.inject({ url: '/api/openapi.json' })).json();
    expect(doc.servers[0].url).toBe('/api');
    expect(doc.paths['/'].get).toMatchObject({ tags: ['index'], summary: expect.any(String) });
    expect(doc.paths['/'].get.responses['200'].content['application/json'].schema.required).toEqual(['name', 'version', 'links']);
    expect(doc.paths['']).toBeUndefined();
    expect(doc.tags.map((tag: { name: string }) => tag.name)).toContain('index');
  });

  it('gets the security headers, CORS and the per-address rate limit like every API route', async () => {
    const app = await sqliteAppWith(defer, { RATE_LIMIT_MAX: '2', CORS_ORIGINS: 'https://app.example.com' });
    const from = { remoteAddress: '192.0.2.1', headers: { origin: 'https://app.example.com' } };
    const answers = [
      await app.inject({ url: '/', ...from }),
      await app.inject({ url: '/api', ...from }),
      await app.inject({ url: '/', ...from }),
    ];
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 429]);
    for (const answer of answers) {
      expect(answer.headers['access-control-allow-origin']).toBe('https://app.example.com');
      expect(answer.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
    }
  });
});
