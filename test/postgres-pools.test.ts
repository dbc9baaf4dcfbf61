import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, DATABASES, type ScratchDatabase, testConfig, withAdmin } from './support/app.js';
import { call, createArticle, registerUser } from './support/client.js';
import { lockWaiter } from './support/locks.js';

const POOL_SIZE = 4;
const LOCK = 4242;

describe.skipIf(!DATABASES.includes('postgres'))('PostgreSQL connections for requests that write', () => {
  let scratch: ScratchDatabase;
  let app: FastifyInstance;

  beforeEach(async () => {
    scratch = await createScratchDatabase('postgres');
    app = await buildApp(testConfig(scratch.url, { DATABASE_POOL_SIZE: String(POOL_SIZE), DATABASE_CONNECT_TIMEOUT: '3s' }));
  });
  afterEach(async () => {
    await app.close();
    await scratch.drop();
  });

  it('answer a favorite while every connection reads can use is held, and the reads queued behind them wait', async () => {
    const author = await registerUser(app, 'author');
    const fan = await registerUser(app, 'fan');
    const { slug } = await createArticle(app, author.token);

    await withAdmin(async (holder) => {
      await holder.query('select pg_advisory_lock($1)', [LOCK]);
      // As many blocked reads as the whole pool has connections: with one shared pool, nothing would be left.
      const blockedReads = Array.from({ length: POOL_SIZE }, () => sql`select pg_advisory_xact_lock(${LOCK})`.execute(app.db));
      await lockWaiter(scratch.url, 'any', { atLeast: POOL_SIZE - 1 });
      let readAnswered = false;
      const read = call(app, 'GET', `/api/articles/${slug}`).finally(() => {
        readAnswered = true;
      });

      const favorite = await call(app, 'POST', `/api/articles/${slug}/favorite`, { token: fan.token });
      expect(favorite.status).toBe(200);
      expect(favorite.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
      expect(readAnswered).toBe(false);

      await holder.query('select pg_advisory_unlock($1)', [LOCK]);
      await Promise.all(blockedReads);
      // The read that waited sees the write that went past it.
      expect((await read).body.article).toMatchObject({ favorited: false, favoritesCount: 1 });
    }, scratch.url);
  });
});
