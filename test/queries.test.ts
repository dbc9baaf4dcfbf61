import type { FastifyInstance } from 'fastify';
import {
  CompiledQuery,
  type Kysely,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryId,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { type DatabaseHandle, openDatabase } from '../src/db/index.js';
import type { Database } from '../src/db/schema.js';
import { createScratchDatabase, DATABASES, type ScratchDatabase, testConfig } from './support/app.js';
import { call, createArticle, registerUser, type TestUser, unique } from './support/client.js';

/**
 * Counts the queries that really ran (a result came back), whatever builds them: the plugin sits on the
 * Kysely instance the app's routes use, transactions included, so no source change is needed.
 */
class QueryCounter implements KyselyPlugin {
  private readonly kinds = new WeakMap<QueryId, string>();
  executed: string[] = [];
  /** The last statement run, as it was sent, to ask for its plan. */
  last: CompiledQuery | undefined;

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.kinds.set(args.queryId, args.node.kind);
    return args.node;
  }

  /**
   * Keeps each statement `db` runs as it was sent: the tree the plugin sees is built once per shape for a prepared
   * query (src/db/prepared.ts), with stand-ins where the values go.
   */
  watch(db: Kysely<Database>): Kysely<Database> {
    const executor = db.getExecutor();
    const execute = executor.executeQuery.bind(executor);
    executor.executeQuery = (query, options) => {
      this.last = query;
      return execute(query, options);
    };
    return db;
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    this.executed.push(this.kinds.get(args.queryId) ?? 'unknown');
    return args.result;
  }

  /** Runs `work` and returns how many queries it ran. */
  async count(work: () => Promise<unknown>): Promise<number> {
    this.executed = [];
    await work();
    return this.executed.length;
  }
}

const ARTICLES = 60;

for (const kind of DATABASES) {
  describe(`query count [${kind}]`, () => {
    let scratch: ScratchDatabase;
    let handle: DatabaseHandle;
    let app: FastifyInstance;
    const counter = new QueryCounter();
    let viewer: TestUser;
    let authors: TestUser[];
    let tag: string;

    /** Queries run by one request that must succeed; the response is checked by `check`. */
    async function queriesOf(url: string, token?: string, check: (body: any) => void = () => {}) {
      let body: unknown;
      const count = await counter.count(async () => {
        const response = await call(app, 'GET', url, { token });
        expect(response.status, `${url}: ${JSON.stringify(response.body)}`).toBe(200);
        body = response.body;
      });
      check(body);
      return count;
    }

    beforeAll(async () => {
      scratch = await createScratchDatabase(kind);
      // The webhook worker polls the same database in the background; its queries are nobody's request's.
      const config = testConfig(scratch.url, { WEBHOOKS_DELIVERY: 'off', SCHEDULED_PUBLISHING: 'off' });
      handle = openDatabase(config.database);
      // Both pools counted: on PostgreSQL a write request's queries run on the writer's.
      const database = { ...handle, db: counter.watch(handle.db.withPlugin(counter)), writer: handle.writer.withPlugin(counter) };
      app = await buildApp(config, { database });

      const users = await Promise.all(['viewer', 'a', 'b', 'c'].map((prefix) => registerUser(app, prefix)));
      viewer = users[0]!;
      authors = users.slice(1);
      tag = unique('common-');
      for (let i = 0; i < ARTICLES; i++) {
        const author = authors[i % authors.length]!;
        const article = await createArticle(app, author.token, { tagList: [tag, `t${i % 7}`, `u${i % 11}`] });
        if (i % 2 === 0) await call(app, 'POST', `/api/articles/${article.slug}/favorite`, { token: viewer.token });
      }
      for (const author of authors) await call(app, 'POST', `/api/profiles/${author.username}/follow`, { token: viewer.token });
    });

    afterAll(async () => {
      await app?.close();
      await handle?.destroy();
      await scratch?.drop();
    });

    it('really counts the queries the routes run', async () => {
      const count = await queriesOf('/api/articles?limit=5');
      expect(count).toBeGreaterThan(0);
      expect(counter.executed.every((kind) => kind === 'SelectQueryNode')).toBe(true);
    });

    it('lists articles anonymously with one query for 1 or 100 items, and a page past the end with two', async () => {
      const counts: number[] = [];
      for (const limit of [1, 10, 50, 100]) {
        counts.push(
          await queriesOf(`/api/articles?limit=${limit}`, undefined, (body) => {
            expect(body.articles).toHaveLength(Math.min(limit, ARTICLES));
            expect(body.articlesCount).toBe(ARTICLES);
          }),
        );
      }
      // The page, with its tags, flags and total in the same statement.
      expect(counts).toEqual(counts.map(() => 1));
      // No row to carry the total: it is asked on its own.
      const pastTheEnd = await queriesOf(`/api/articles?offset=${ARTICLES}`, undefined, (body) =>
        expect(body).toEqual({ articles: [], articlesCount: ARTICLES, nextCursor: null }),
      );
      expect(pastTheEnd).toBe(2);
    });

    it('adds only the token check when signed in: the flags come with the page', async () => {
      const tokenCheck = await queriesOf('/api/user', viewer.token);
      expect(tokenCheck).toBe(1);
      for (const limit of [1, 50, 100]) {
        const count = await queriesOf(`/api/articles?limit=${limit}`, viewer.token, (body) => {
          expect(body.articles).toHaveLength(Math.min(limit, ARTICLES));
          if (limit > 1) expect(body.articles.some((item: { favorited: boolean }) => item.favorited)).toBe(true);
          if (limit > 1) expect(body.articles.some((item: { favorited: boolean }) => !item.favorited)).toBe(true);
          expect(body.articles.every((item: { author: { following: boolean } }) => item.author.following)).toBe(true);
        });
        expect(count).toBe(1 + tokenCheck);
      }
    });

    /** The plan of the query the feed route ran last, one line per step. */
    async function lastFeedPlan(): Promise<string[]> {
      await queriesOf('/api/articles/feed?limit=20&offset=20', viewer.token);
      const feed = counter.last!;
      const explain = kind === 'sqlite' ? 'explain query plan' : 'explain (costs off)';
      const { rows } = await handle.db.executeQuery<Record<string, string>>(
        CompiledQuery.raw(`${explain} ${feed.sql}`, [...feed.parameters]),
      );
      return rows.map((row) => (kind === 'sqlite' ? row.detail! : row['QUERY PLAN']!.trim()));
    }

    // SQLite has no LATERAL: the feed relies on its planner walking each followed author's index range.
    // PostgreSQL spells that walk out, so the plan stays the same while the statistics say the table is tiny.
    it('plans a feed page as one range of the author index per followed author, never a scan of all articles', async () => {
      const plan = await lastFeedPlan();
      if (kind === 'sqlite') {
        // The range of the author's public articles (listed_at up to now), newest first.
        expect(plan).toContain('SEARCH articles USING COVERING INDEX articles_author_listed_idx (author_id=? AND listed_at<?)');
        expect(plan.filter((step) => step.startsWith('SCAN'))).toEqual([]);
      } else {
        // With a table this small the walk may be a bitmap scan per author rather than an ordered one: still one author.
        expect(plan.join('\n')).toMatch(/Index (Only )?Scan (Backward )?(using|on) articles_author_listed_idx/);
        // The range of the followed author's public articles (listed_at up to now).
        expect(plan.join('\n')).toMatch(/Index Cond: \(\(author_id = follows\.followed_id\) AND \(listed_at <= /);
        expect(plan.filter((step) => /Seq Scan on articles/.test(step))).toEqual([]);
      }
    });

    it('keeps the count fixed with every filter at once', async () => {
      const author = authors[0]!;
      const counts: number[] = [];
      for (const limit of [1, 100]) {
        counts.push(
          await queriesOf(
            `/api/articles?limit=${limit}&tag=${tag}&author=${author.username}&favorited=${viewer.username}`,
            viewer.token,
            (body) => {
              expect(body.articlesCount).toBe(10);
              expect(body.articles).toHaveLength(Math.min(limit, 10));
            },
          ),
        );
      }
      // The token check and the page, the count of the combined matches within it.
      expect(counts).toEqual(counts.map(() => 2));
    });

    it('serves the feed with the same number of queries for 1 or 100 items', async () => {
      const counts: number[] = [];
      for (const limit of [1, 20, 100]) {
        counts.push(
          await queriesOf(`/api/articles/feed?limit=${limit}`, viewer.token, (body) => {
            expect(body.articles).toHaveLength(Math.min(limit, ARTICLES));
            expect(body.articlesCount).toBe(ARTICLES);
          }),
        );
      }
      expect(counts).toEqual(counts.map(() => 2));
    });

    it('gets one article with the same number of queries whatever its number of tags', async () => {
      const author = authors[1]!;
      const few = await createArticle(app, author.token, { tagList: ['one'] });
      const many = await createArticle(app, author.token, { tagList: Array.from({ length: 20 }, (_, i) => `many-${i}`) });
      const fewCount = await queriesOf(`/api/articles/${few.slug}`, viewer.token, (body) => expect(body.article.tagList).toHaveLength(1));
      const manyCount = await queriesOf(`/api/articles/${many.slug}`, viewer.token, (body) =>
        expect(body.article.tagList).toHaveLength(20),
      );
      // The token check and the article with its tags and the viewer's flags.
      expect([fewCount, manyCount]).toEqual([2, 2]);
    });

    it('lists notifications with the same number of queries for 1 or all 11 of them', async () => {
      // The viewer's favorites of 10 of the first author's articles, and the follow.
      const author = authors[0]!;
      const counts: number[] = [];
      for (const limit of [1, 100]) {
        counts.push(
          await queriesOf(`/api/notifications?limit=${limit}`, author.token, (body) => {
            expect(body.notifications).toHaveLength(Math.min(limit, 11));
            expect(body.unreadCount).toBe(11);
          }),
        );
      }
      // The token check, the page, and the read mark with the unread count.
      expect(counts).toEqual([3, 3]);
    });

    it('lists comments with the same number of queries for 1 or 30 comments by different authors', async () => {
      const author = authors[2]!;
      const one = await createArticle(app, author.token);
      const thirty = await createArticle(app, author.token);
      await call(app, 'POST', `/api/articles/${one.slug}/comments`, { token: viewer.token, body: { comment: { body: 'only' } } });
      for (let i = 0; i < 30; i++) {
        const commenter = [viewer, ...authors][i % 4]!;
        await call(app, 'POST', `/api/articles/${thirty.slug}/comments`, { token: commenter.token, body: { comment: { body: `c${i}` } } });
      }
      for (const token of [viewer.token, undefined]) {
        const oneCount = await queriesOf(`/api/articles/${one.slug}/comments`, token, (body) => expect(body.comments).toHaveLength(1));
        const thirtyCount = await queriesOf(`/api/articles/${thirty.slug}/comments`, token, (body) =>
          expect(body.comments).toHaveLength(30),
        );
        // The article, its comments; signed in, the token check comes on top.
        expect([oneCount, thirtyCount]).toEqual(token === undefined ? [2, 2] : [3, 3]);
      }
    });
  });
}
