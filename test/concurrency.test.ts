import { beforeAll, describe, expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, type TestUser, unique } from './support/client.js';
import { derivedDataMismatches, NO_MISMATCHES } from './support/invariants.js';

describeEachDatabase('concurrency', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  const statuses = (responses: Array<{ status: number }>) => responses.map((response) => response.status);
  const times = <T>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));

  /** The stored counter, the rows it counts, and what the API says, for one article. */
  async function favoriteState(slug: string) {
    const article = await db().selectFrom('articles').select(['id', 'favorites_count']).where('slug', '=', slug).executeTakeFirstOrThrow();
    const rows = await db().selectFrom('favorites').select('user_id').where('article_id', '=', article.id).execute();
    const api = await call(app(), 'GET', `/api/articles/${slug}`);
    return { counter: article.favorites_count, rows: rows.length, api: api.body.article.favoritesCount as number };
  }

  /** For every tag: [name, article_count column, rows in article_tags]. */
  async function tagCounts(names: string[]) {
    const tags = await db().selectFrom('tags').select(['id', 'name', 'article_count']).where('name', 'in', names).execute();
    const result: Array<[string, number, number]> = [];
    for (const tag of tags.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const links = await db().selectFrom('article_tags').select('article_id').where('tag_id', '=', tag.id).execute();
      result.push([tag.name, tag.article_count, links.length]);
    }
    return result;
  }

  describe('favorites', () => {
    let fans: TestUser[];
    let slug: string;

    beforeAll(async () => {
      const author = await registerUser(app(), 'author');
      fans = await Promise.all(times(20, () => registerUser(app(), 'fan')));
      slug = (await createArticle(app(), author.token)).slug;
    });

    it('20 users favoriting one article at once: favoritesCount 20, 20 rows', async () => {
      const responses = await Promise.all(fans.map((fan) => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: fan.token })));
      expect(statuses(responses)).toEqual(times(20, () => 200));
      for (const response of responses) expect(response.body.article.favorited).toBe(true);
      expect(await favoriteState(slug)).toEqual({ counter: 20, rows: 20, api: 20 });
    });

    it('the same 20 unfavoriting at once: back to 0 and no rows', async () => {
      const responses = await Promise.all(fans.map((fan) => call(app(), 'DELETE', `/api/articles/${slug}/favorite`, { token: fan.token })));
      expect(statuses(responses)).toEqual(times(20, () => 200));
      for (const response of responses) expect(response.body.article.favorited).toBe(false);
      expect(await favoriteState(slug)).toEqual({ counter: 0, rows: 0, api: 0 });
    });

    it('one user favoriting the same article 10 times at once: one row, count 1', async () => {
      const fan = fans[0]!;
      const responses = await Promise.all(times(10, () => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: fan.token })));
      expect(statuses(responses)).toEqual(times(10, () => 200));
      for (const response of responses) expect(response.body.article).toMatchObject({ favorited: true, favoritesCount: 1 });
      expect(await favoriteState(slug)).toEqual({ counter: 1, rows: 1, api: 1 });
    });

    it('one user unfavoriting 10 times at once: no row, count 0', async () => {
      const fan = fans[0]!;
      const responses = await Promise.all(times(10, () => call(app(), 'DELETE', `/api/articles/${slug}/favorite`, { token: fan.token })));
      expect(statuses(responses)).toEqual(times(10, () => 200));
      for (const response of responses) expect(response.body.article).toMatchObject({ favorited: false, favoritesCount: 0 });
      expect(await favoriteState(slug)).toEqual({ counter: 0, rows: 0, api: 0 });
    });

    it('favorites and unfavorites interleaved at once settle on the true count', async () => {
      // The first 10 fans favorite first; then, at once, fans 0-9 unfavorite while fans 10-19 favorite (twice each).
      await Promise.all(fans.slice(0, 10).map((fan) => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: fan.token })));
      const responses = await Promise.all([
        ...fans.slice(0, 10).map((fan) => call(app(), 'DELETE', `/api/articles/${slug}/favorite`, { token: fan.token })),
        ...fans.slice(10).map((fan) => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: fan.token })),
        ...fans.slice(10).map((fan) => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token: fan.token })),
      ]);
      expect(statuses(responses)).toEqual(times(30, () => 200));
      expect(await favoriteState(slug)).toEqual({ counter: 10, rows: 10, api: 10 });
      const byFan = await call(app(), 'GET', `/api/articles?favorited=${fans[15]!.username}`);
      expect(byFan.body.articlesCount).toBe(1);
      const byOldFan = await call(app(), 'GET', `/api/articles?favorited=${fans[5]!.username}`);
      expect(byOldFan.body.articlesCount).toBe(0);
    });
  });

  describe('articles', () => {
    it('10 creates with one title at once: all 201 with 10 distinct slugs', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('c');
      const title = `Same Title ${id}`;
      const responses = await Promise.all(
        times(10, (i) =>
          call(app(), 'POST', '/api/articles', {
            token: author.token,
            body: { article: { title, description: `copy ${i}`, body: 'b' } },
          }),
        ),
      );
      expect(statuses(responses)).toEqual(times(10, () => 201));
      const slugs = responses.map((response) => response.body.article.slug as string);
      expect(new Set(slugs).size).toBe(10);
      expect(slugs).toContain(`same-title-${id}`);
      for (const slug of slugs) expect(slug.startsWith(`same-title-${id}`)).toBe(true);
      // Each slug leads to its own article.
      const fetched = await Promise.all(slugs.map((slug) => call(app(), 'GET', `/api/articles/${slug}`)));
      expect(fetched.map((response) => response.body.article.description).sort()).toEqual(times(10, (i) => `copy ${i}`).sort());
      const list = await call(app(), 'GET', `/api/articles?author=${author.username}`);
      expect(list.body.articlesCount).toBe(10);
    });

    it("creates with overlapping new tags at once: each tag's article_count equals its rows in article_tags", async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('');
      const shared = [`shared-a-${id}`, `shared-b-${id}`, `shared-c-${id}`];
      const own = times(12, (i) => `own-${i}-${id}`);
      // Every article gets two of the three shared tags (overlapping in different orders) and one of its own.
      const tagLists = times(12, (i) => {
        const tags = [own[i]!, shared[i % 3]!, shared[(i + 1) % 3]!];
        return i % 2 === 0 ? tags : tags.reverse();
      });
      const responses = await Promise.all(
        tagLists.map((tagList) =>
          call(app(), 'POST', '/api/articles', {
            token: author.token,
            body: { article: { title: unique('T '), description: 'd', body: 'b', tagList } },
          }),
        ),
      );
      expect(statuses(responses)).toEqual(times(12, () => 201));
      for (const [i, response] of responses.entries()) expect(response.body.article.tagList).toEqual([...tagLists[i]!].sort());

      const counts = await tagCounts([...shared, ...own]);
      expect(counts).toHaveLength(15);
      for (const [name, counter, rows] of counts) {
        expect({ name, counter }).toEqual({ name, counter: rows });
        expect(rows).toBe(shared.includes(name) ? 8 : 1);
      }
      const tags = await call(app(), 'GET', '/api/tags');
      expect(tags.body.tags.slice(0, 3)).toEqual([...shared].sort());

      // Updates that move tags around at once, then deletes at once, keep the counters right.
      const slugs = responses.map((response) => response.body.article.slug as string);
      const updates = await Promise.all(
        slugs.map((slug, i) =>
          call(app(), 'PUT', `/api/articles/${slug}`, {
            token: author.token,
            body: { article: { tagList: i % 2 === 0 ? [shared[0]!] : [] } },
          }),
        ),
      );
      expect(statuses(updates)).toEqual(times(12, () => 200));
      const afterUpdates = await tagCounts([...shared, ...own]);
      for (const [name, counter, rows] of afterUpdates) {
        expect({ name, counter }).toEqual({ name, counter: rows });
        expect(rows).toBe(name === shared[0] ? 6 : 0);
      }

      const deletes = await Promise.all(slugs.map((slug) => call(app(), 'DELETE', `/api/articles/${slug}`, { token: author.token })));
      expect(statuses(deletes)).toEqual(times(12, () => 204));
      for (const [name, counter, rows] of await tagCounts([...shared, ...own])) {
        expect({ name, counter, rows }).toEqual({ name, counter: 0, rows: 0 });
      }
    }, 90_000);

    it('tag swaps at once on articles sharing tags (crossing lock orders): all 200, counters equal rows', async () => {
      const author = await registerUser(app(), 'author');
      const id = unique('');
      const s = times(4, (k) => `swap${k}-${id}`);
      // Article i moves from {s[i], s[i+1]} to the other two: one update frees exactly what another one takes.
      const tagsBefore = (i: number) => [s[i % 4]!, s[(i + 1) % 4]!];
      const tagsAfter = (i: number) => [s[(i + 2) % 4]!, s[(i + 3) % 4]!];
      const slugs: string[] = [];
      for (let i = 0; i < 8; i++) slugs.push((await createArticle(app(), author.token, { tagList: tagsBefore(i) })).slug);

      const responses = await Promise.all(
        slugs.map((slug, i) =>
          call(app(), 'PUT', `/api/articles/${slug}`, { token: author.token, body: { article: { tagList: tagsAfter(i) } } }),
        ),
      );
      expect(statuses(responses)).toEqual(times(8, () => 200));
      for (const [i, response] of responses.entries()) expect(response.body.article.tagList).toEqual([...tagsAfter(i)].sort());
      for (const [name, counter, rows] of await tagCounts(s)) {
        expect({ name, counter }).toEqual({ name, counter: rows });
        expect(rows).toBe(4);
      }
    }, 90_000);

    it('comments posted at once are all kept, with distinct ids', async () => {
      const author = await registerUser(app(), 'author');
      const article = await createArticle(app(), author.token);
      const responses = await Promise.all(
        times(15, (i) =>
          call(app(), 'POST', `/api/articles/${article.slug}/comments`, { token: author.token, body: { comment: { body: `c${i}` } } }),
        ),
      );
      expect(statuses(responses)).toEqual(times(15, () => 201));
      expect(new Set(responses.map((response) => response.body.comment.id)).size).toBe(15);
      const list = await call(app(), 'GET', `/api/articles/${article.slug}/comments`);
      expect(list.body.comments.map((c: { body: string }) => c.body).sort()).toEqual(times(15, (i) => `c${i}`).sort());
    });
  });

  describe('registration', () => {
    it('10 registrations of one username at once: exactly one 201 and nine 409', async () => {
      const username = unique('race');
      const responses = await Promise.all(
        times(10, (i) =>
          call(app(), 'POST', '/api/users', {
            body: { user: { username, email: `${username}-${i}@example.com`, password: 'password123' } },
          }),
        ),
      );
      const sorted = [...statuses(responses)].sort();
      expect(sorted).toEqual([201, ...times(9, () => 409)]);
      for (const response of responses.filter((r) => r.status === 409)) {
        expect(response.body).toEqual({ errors: { username: ['has already been taken'] } });
      }
      const rows = await db().selectFrom('users').select('id').where('username_key', '=', username.toLowerCase()).execute();
      expect(rows).toHaveLength(1);
    });

    it('10 registrations of one username in different cases at once: exactly one 201', async () => {
      const base = unique('case');
      const spellings = times(10, (i) => (i % 2 === 0 ? base.toUpperCase() : base));
      const responses = await Promise.all(
        spellings.map((username, i) =>
          call(app(), 'POST', '/api/users', { body: { user: { username, email: `${base}-${i}@example.com`, password: 'password123' } } }),
        ),
      );
      expect([...statuses(responses)].sort()).toEqual([201, ...times(9, () => 409)]);
      for (const response of responses.filter((r) => r.status === 409)) {
        expect(response.body).toEqual({ errors: { username: ['has already been taken'] } });
      }
    });

    it('10 registrations of one email at once: exactly one 201 and nine 409 on email', async () => {
      const email = `${unique('mail')}@example.com`;
      const responses = await Promise.all(
        times(10, () => call(app(), 'POST', '/api/users', { body: { user: { username: unique('m'), email, password: 'password123' } } })),
      );
      expect([...statuses(responses)].sort()).toEqual([201, ...times(9, () => 409)]);
      for (const response of responses.filter((r) => r.status === 409)) {
        expect(response.body).toEqual({ errors: { email: ['has already been taken'] } });
      }
    });
  });
  describe('deletes beside favorites', () => {
    // On PostgreSQL an unfavorite that took its favorite row before the article's, or two deletes whose authors
    // favorited each other's articles, locked rows in opposite orders: a deadlock, answered with a 500.
    it("unfavorites racing deletes, and deletes of articles whose authors favorited each other's: never a 500, counts exact", async () => {
      const [first, second] = await Promise.all(times(2, () => registerUser(app(), 'crossing')));
      const fans = await Promise.all(times(6, () => registerUser(app(), 'leaving')));
      for (let round = 0; round < 4; round++) {
        const mine = await createArticle(app(), first!.token);
        const theirs = await createArticle(app(), second!.token);
        const favorite = (slug: string, token: string) => call(app(), 'POST', `/api/articles/${slug}/favorite`, { token });
        await favorite(mine.slug, second!.token);
        await favorite(theirs.slug, first!.token);
        for (const fan of fans) await Promise.all([favorite(mine.slug, fan.token), favorite(theirs.slug, fan.token)]);
        const writes = await Promise.all([
          ...fans.flatMap((fan) =>
            [mine, theirs].map((article) => call(app(), 'DELETE', `/api/articles/${article.slug}/favorite`, { token: fan.token })),
          ),
          call(app(), 'DELETE', `/api/articles/${mine.slug}`, { token: first!.token }),
          call(app(), 'DELETE', `/api/articles/${theirs.slug}`, { token: second!.token }),
        ]);
        for (const response of writes) expect([200, 204, 404], JSON.stringify(response.body)).toContain(response.status);
      }
      expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);
    }, 90_000);
  });

  describe('list totals', () => {
    it('creates, favorites, unfavorites and deletes at once: every counter equals its rows, every articlesCount its matches', async () => {
      const authors = await Promise.all(times(3, () => registerUser(app(), 'writer')));
      const fans = await Promise.all(times(6, () => registerUser(app(), 'reader')));
      const tag = unique('total');
      await Promise.all(fans.map((fan) => call(app(), 'POST', `/api/profiles/${authors[0]!.username}/follow`, { token: fan.token })));
      const created = await Promise.all(times(12, (i) => createArticle(app(), authors[i % 3]!.token, { tagList: [tag, unique('own')] })));
      const doomed = created.slice(0, 4);
      // Favorites of articles being deleted race with the deletes: each ends either counted or cascaded away.
      const writes = await Promise.all([
        ...created.flatMap((article) =>
          fans.map((fan) => call(app(), 'POST', `/api/articles/${article.slug}/favorite`, { token: fan.token })),
        ),
        ...created.slice(4, 8).map((article) => call(app(), 'DELETE', `/api/articles/${article.slug}/favorite`, { token: fans[0]!.token })),
        ...doomed.map((article) =>
          call(app(), 'DELETE', `/api/articles/${article.slug}`, { token: authors[created.indexOf(article) % 3]!.token }),
        ),
      ]);
      for (const response of writes) expect([200, 204, 404]).toContain(response.status);

      expect(await derivedDataMismatches(db())).toEqual(NO_MISMATCHES);
      const total = async (query: string, token?: string) => {
        const response = await call(app(), 'GET', `/api/articles${query}`, { token });
        expect(response.status).toBe(200);
        return response.body.articlesCount as number;
      };
      const everything = await db().selectFrom('articles').select('id').execute();
      expect(await total('')).toBe(everything.length);
      expect(await total(`?tag=${tag}`)).toBe(8);
      const survivorsBy = (author: number) => created.filter((article, i) => i % 3 === author && !doomed.includes(article)).length;
      expect(await total(`?author=${authors[0]!.username}`)).toBe(survivorsBy(0));
      const favoritedByFirstFan = await db()
        .selectFrom('favorites')
        .innerJoin('users', 'users.id', 'favorites.user_id')
        .select('favorites.article_id')
        .where('users.username', '=', fans[0]!.username)
        .execute();
      expect(await total(`?favorited=${fans[0]!.username}`)).toBe(favoritedByFirstFan.length);
      expect(await total('/feed', fans[1]!.token)).toBe(await total(`?author=${authors[0]!.username}`));
      expect(await total(`?tag=${tag}&author=${authors[1]!.username}`)).toBe(survivorsBy(1));
    }, 90_000);
  });
});
