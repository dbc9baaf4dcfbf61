import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { sendAnswer, shareAnswer } from '../src/shared-answers.js';

describe('shareAnswer', () => {
  it('freezes the answer and everything in it, and returns the same object', () => {
    const answer = { articles: [{ tagList: ['a'], author: { username: 'x' } }], articlesCount: 1 };
    expect(shareAnswer(answer)).toBe(answer);
    expect(Object.isFrozen(answer)).toBe(true);
    expect(Object.isFrozen(answer.articles)).toBe(true);
    expect(Object.isFrozen(answer.articles[0])).toBe(true);
    expect(Object.isFrozen(answer.articles[0]!.tagList)).toBe(true);
    expect(Object.isFrozen(answer.articles[0]!.author)).toBe(true);
  });
});

describe('sendAnswer', () => {
  /** A route whose serializer counts its calls and keeps only `name`, as a response schema would. */
  async function appSending(answer: () => object) {
    let serializations = 0;
    const app = Fastify();
    app.get(
      '/',
      {
        schema: { response: { 200: { type: 'object', properties: { name: { type: 'string' } } } } },
        serializerCompiler: () => (data) => {
          serializations++;
          return JSON.stringify({ name: (data as { name: string }).name });
        },
      },
      async (_request, reply) => sendAnswer(reply, answer()),
    );
    await app.ready();
    return { app, serializations: () => serializations };
  }

  it("encodes a shared answer once, with the route's serializer, and sends the same bytes as JSON every time", async () => {
    const shared = shareAnswer({ name: 'shared', secret: 'not in the schema' });
    const { app, serializations } = await appSending(() => shared);
    const first = await app.inject({ url: '/' });
    const second = await app.inject({ url: '/' });
    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(first.body).toBe('{"name":"shared"}');
    expect(second.body).toBe(first.body);
    expect(serializations()).toBe(1);
    await app.close();
  });

  it('serializes an answer that is not frozen on every send, so a changed object is sent as it is now', async () => {
    const mutable = { name: 'before' };
    const { app, serializations } = await appSending(() => mutable);
    expect((await app.inject({ url: '/' })).body).toBe('{"name":"before"}');
    mutable.name = 'after';
    expect((await app.inject({ url: '/' })).body).toBe('{"name":"after"}');
    expect(serializations()).toBe(2);
    await app.close();
  });
});
