import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, type Executor, openDatabase } from '../src/db/index.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { preparedQuery } from '../src/db/prepared.js';
import { createScratchDatabase, DATABASES, directUrl, type ScratchDatabase, scratchHandle, testConfig } from './support/app.js';

interface TagValues {
  name?: string;
  minimum?: number | null;
  above?: number;
}

/** A query with an optional filter, a value used twice, a constant, and a size written into its text. */
const build = (db: Executor, values: TagValues, limit: number) =>
  db
    .selectFrom('tags')
    .select(['tags.name', 'tags.article_count'])
    .$if(values.name !== undefined, (query) => query.where('tags.name', '=', values.name!))
    .$if(values.minimum !== undefined && values.minimum !== null, (query) =>
      query.where('tags.article_count', '>=', values.minimum!).where(sql<boolean>`${values.minimum!} >= 0`),
    )
    .$if(values.above !== undefined, (query) => query.where('tags.article_count', '>', values.above!))
    .where('tags.name', '<>', 'never-a-tag')
    .orderBy('tags.name')
    .limit(sql.lit(limit));

for (const kind of DATABASES) {
  describe(`prepared queries [${kind}]`, () => {
    const handle = scratchHandle(kind);

    beforeAll(async () => {
      await handle()
        .db.insertInto('tags')
        .values(['alpha', 'beta', 'gamma', 'delta'].map((name, index) => ({ name, article_count: index })))
        .execute();
    });

    it('sends the text and values a query built afresh sends, for every shape, whatever came before', async () => {
      const tags = preparedQuery(build);
      const calls: [TagValues, number][] = [
        [{}, 10],
        [{ name: 'beta' }, 10],
        [{ name: 'gamma' }, 10],
        [{ minimum: 2 }, 10],
        [{ minimum: 3 }, 1],
        [{ minimum: null }, 10],
        [{ name: 'delta', minimum: 1 }, 10],
        [{ name: 'alpha', minimum: 1 }, 10],
        [{ minimum: 0, above: 2 }, 10],
        [{ above: 0, minimum: 1 }, 2],
      ];
      for (const [values, limit] of [...calls, ...calls]) {
        const sent = tags.compile(handle().db, values, limit);
        const fresh = build(handle().db, values, limit).compile();
        expect({ sql: sent.sql, parameters: sent.parameters }).toEqual({ sql: fresh.sql, parameters: fresh.parameters });
        expect(await tags.execute(handle().db, values, limit)).toEqual(await build(handle().db, values, limit).execute());
      }
    });

    it('answers each call with its own values, on a shape built by an earlier call', async () => {
      const tags = preparedQuery(build);
      const names = async (values: TagValues, limit = 10) => (await tags.execute(handle().db, values, limit)).map((row) => row.name);
      expect(await names({ minimum: 2 })).toEqual(['delta', 'gamma']);
      expect(await names({ minimum: 1 })).toEqual(['beta', 'delta', 'gamma']);
      expect(await names({ name: 'alpha' })).toEqual(['alpha']);
      expect(await names({ name: 'beta' })).toEqual(['beta']);
      expect(await names({ minimum: 1, name: 'gamma' })).toEqual(['gamma']);
      expect(await names({ minimum: 3, name: 'gamma' })).toEqual([]);
      // null is not given: the filter is left out, not bound as null.
      expect(await names({ minimum: null })).toEqual(['alpha', 'beta', 'delta', 'gamma']);
      // The size is part of the shape: a second size builds a second text.
      expect(await names({}, 2)).toEqual(['alpha', 'beta']);
      expect(await names({}, 3)).toEqual(['alpha', 'beta', 'delta']);
    });

    it('runs in a transaction as on the handle', async () => {
      const tags = preparedQuery(build);
      await handle()
        .writer.transaction()
        .execute(async (trx) => {
          await trx.insertInto('tags').values({ name: 'epsilon', article_count: 9 }).execute();
          expect(await tags.execute(trx, { minimum: 9 }, 10)).toEqual([{ name: 'epsilon', article_count: 9 }]);
          await trx.deleteFrom('tags').where('name', '=', 'epsilon').execute();
        });
    });
  });
}

describe.runIf(DATABASES.includes('postgres'))('prepared queries on PostgreSQL', () => {
  let scratch: ScratchDatabase;
  let handle: DatabaseHandle;
  /** Like `handle`, with DATABASE_PREPARED_STATEMENTS=off. */
  let unnamed: DatabaseHandle;

  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
    // Two connections: one for reads, one for writes, so every read below runs on the same session; straight to
    // PostgreSQL, past the suite's pooler if any, whose sessions are not the server's.
    const config = (overrides: Record<string, string>) =>
      testConfig(directUrl(scratch.url), { DATABASE_POOL_SIZE: '2', ...overrides }).database;
    handle = openDatabase(config({}));
    unnamed = openDatabase(config({ DATABASE_PREPARED_STATEMENTS: 'off' }));
    await migrateToLatest(handle);
  });

  afterAll(async () => {
    await handle?.destroy();
    await unnamed?.destroy();
    await scratch?.drop();
  });

  const namedOnSession = async (on = handle) =>
    (await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(on.db)).rows.map((row) => row.statement);

  it('sends its texts as named statements, parsed once per connection, at most 64 of them on one connection', async () => {
    const tags = preparedQuery(build);
    for (let limit = 1; limit <= 70; limit++) {
      expect(await tags.execute(handle.db, { minimum: limit % 3 }, limit)).toEqual(
        await build(handle.db, { minimum: limit % 3 }, limit).execute(),
      );
    }
    const named = await namedOnSession();
    expect(named).toHaveLength(64);
    expect(named).toContain(tags.compile(handle.db, { minimum: 1 }, 1).sql);
    expect(named).not.toContain(tags.compile(handle.db, { minimum: 1 }, 70).sql);
    // Past the bound a text still runs, unnamed, with its own values.
    expect(await tags.execute(handle.db, { name: 'none' }, 70)).toEqual([]);
    // A text built afresh, not prepared, is never named.
    await build(handle.db, { above: 1 }, 5).execute();
    expect(await namedOnSession()).not.toContain(build(handle.db, { above: 1 }, 5).compile().sql);
  });

  it('names none with DATABASE_PREPARED_STATEMENTS=off, for a pooler that cannot keep them, and answers alike', async () => {
    const tags = preparedQuery(build);
    for (const minimum of [0, 1, 2, 0, 1, 2]) {
      expect(await tags.execute(unnamed.db, { minimum }, 10)).toEqual(await tags.execute(handle.db, { minimum }, 10));
    }
    expect(await namedOnSession(unnamed)).toEqual([]);
  });
});
