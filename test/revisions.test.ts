import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createMigrator, unwrap } from '../src/db/migrate.js';
import { DATABASES, describeEachDatabase, scratchHandle } from './support/app.js';
import { call, registerUser, type TestUser, unique } from './support/client.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Content {
  title: string;
  description: string;
  body: string;
  tagList: string[];
}

describeEachDatabase('article revisions', (ctx) => {
  const app = () => ctx().app;
  const db = () => ctx().app.db;

  /** Creates an article (a draft with `status`) and returns its answer. */
  async function write(author: TestUser, article: Partial<Content> & { status?: string } = {}) {
    const body = { title: unique('Title '), description: 'About it', body: 'The body', tagList: ['one'], ...article };
    const response = await call(app(), 'POST', '/api/articles', { token: author.token, body: { article: body } });
    expect(response.status).toBe(201);
    return response.body.article;
  }

  async function edit(author: TestUser, slug: string, changes: Record<string, unknown>) {
    const response = await call(app(), 'PUT', `/api/articles/${slug}`, { token: author.token, body: { article: changes } });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body.article;
  }

  const revisions = (slug: string, token?: string, query = '') => call(app(), 'GET', `/api/articles/${slug}/revisions${query}`, { token });
  const revision = (slug: string, id: number | string, token?: string) =>
    call(app(), 'GET', `/api/articles/${slug}/revisions/${id}`, { token });
  const restore = (slug: string, id: number | string, token?: string, headers?: Record<string, string>) =>
    call(app(), 'POST', `/api/articles/${slug}/revisions/${id}/restore`, { token, headers });

  /** Every revision of the article the author sees, newest first (one page of 100). */
  async function allRevisions(author: TestUser, slug: string) {
    const response = await revisions(slug, author.token, '?limit=100');
    expect(response.status).toBe(200);
    return response.body as { revisions: Array<Content & { id: number; createdAt: string }>; revisionsCount: number; nextCursor: null };
  }

  const storedCount = async (slug: string) => {
    const { n } = await db()
      .selectFrom('article_revisions')
      .innerJoin('articles', 'articles.id', 'article_revisions.article_id')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('articles.slug', '=', slug)
      .executeTakeFirstOrThrow();
    return Number(n);
  };

  it('creating keeps one revision of what was written, tags normalised; showing it adds the body', async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author, { title: 'First words', tagList: [' zeta', 'alpha', 'zeta'] });
    const list = await revisions(article.slug, author.token);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      revisions: [
        { id: expect.any(Number), title: 'First words', description: 'About it', tagList: ['alpha', 'zeta'], createdAt: article.createdAt },
      ],
      revisionsCount: 1,
      nextCursor: null,
    });
    const [only] = list.body.revisions;
    const shown = await revision(article.slug, only.id, author.token);
    expect(shown.status).toBe(200);
    expect(shown.body).toEqual({ revision: { ...only, body: 'The body' } });
    expect(shown.body.revision.createdAt).toMatch(ISO_MS);
  });

  it('keeps one revision per edit that changes content, none for the same values or a change of status alone', async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author, { status: 'draft', tagList: ['b', 'a'] });
    const renamed = await edit(author, article.slug, { title: 'Renamed' });
    await edit(author, renamed.slug, { body: 'Another body' });
    const retagged = await edit(author, renamed.slug, { tagList: ['c'] });
    expect((await allRevisions(author, renamed.slug)).revisionsCount).toBe(4);

    // The same values again, tags in another order and duplicated: no revision, though updatedAt moves.
    const same = await edit(author, renamed.slug, {
      title: 'Renamed',
      description: 'About it',
      body: 'Another body',
      tagList: ['c', ' c'],
    });
    expect(same.updatedAt > retagged.updatedAt).toBe(true);
    expect((await allRevisions(author, renamed.slug)).revisionsCount).toBe(4);
    // A transition alone keeps none either, nor does an edit that only restates the status.
    const published = await edit(author, renamed.slug, { status: 'published' });
    expect(published.status).toBe('published');
    await edit(author, renamed.slug, { status: 'published', tagList: ['c'] });
    await edit(author, renamed.slug, { status: 'unpublished' });

    const { revisions: kept, revisionsCount } = await allRevisions(author, renamed.slug);
    expect(revisionsCount).toBe(4);
    expect(kept.map(({ title, body, tagList }) => ({ title, body, tagList }))).toEqual([
      { title: 'Renamed', body: undefined, tagList: ['c'] },
      { title: 'Renamed', body: undefined, tagList: ['a', 'b'] },
      { title: 'Renamed', body: undefined, tagList: ['a', 'b'] },
      { title: article.title, body: undefined, tagList: ['a', 'b'] },
    ]);
    // Newest first by id, each dated when its edit was written.
    expect(kept.map((entry) => entry.id)).toEqual(kept.map((entry) => entry.id).sort((a, b) => b - a));
    expect(kept[0]!.createdAt).toBe(retagged.updatedAt);
    expect((await revision(renamed.slug, kept[1]!.id, author.token)).body.revision.body).toBe('Another body');
    expect((await revision(renamed.slug, kept[2]!.id, author.token)).body.revision.body).toBe('The body');
  });

  it('pages newest first by limit and offset or by cursor, and refuses what is not a page', async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author);
    for (const n of [1, 2, 3, 4]) await edit(author, article.slug, { body: `Body ${n}` });
    const all = (await allRevisions(author, article.slug)).revisions.map((entry) => entry.id);
    expect(all).toHaveLength(5);

    const first = await revisions(article.slug, author.token, '?limit=2');
    expect(first.body.revisions.map((entry: { id: number }) => entry.id)).toEqual(all.slice(0, 2));
    expect(first.body.revisionsCount).toBe(5);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    // A new revision meanwhile does not shift the pages that follow a cursor.
    await edit(author, article.slug, { body: 'Body 5' });
    const second = await revisions(article.slug, author.token, `?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.revisions.map((entry: { id: number }) => entry.id)).toEqual(all.slice(2, 4));
    expect(second.body.revisionsCount).toBe(6);
    const last = await revisions(article.slug, author.token, `?limit=2&cursor=${second.body.nextCursor}`);
    expect(last.body).toMatchObject({ revisions: [{ id: all[4] }], nextCursor: null });

    const byOffset = await revisions(article.slug, author.token, '?limit=2&offset=4');
    expect(byOffset.body.revisions.map((entry: { id: number }) => entry.id)).toEqual(all.slice(3, 5));
    expect(byOffset.body.nextCursor).toBeNull();
    const pastTheEnd = await revisions(article.slug, author.token, '?offset=50');
    expect(pastTheEnd.body).toEqual({ revisions: [], revisionsCount: 6, nextCursor: null });
    const byDefault = await revisions(article.slug, author.token);
    expect(byDefault.body.revisions).toHaveLength(6);

    for (const [query, field] of [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?offset=-1', 'offset'],
      ['?cursor=nonsense!', 'cursor'],
      [`?offset=1&cursor=${first.body.nextCursor}`, 'cursor'],
    ]) {
      const refused = await revisions(article.slug, author.token, query);
      expect(refused.status, query).toBe(422);
      expect(Object.keys(refused.body.errors), query).toEqual([field]);
    }
    // A bad request is a 422 before an unknown article is a 404.
    expect((await revisions('no-such-article', author.token, '?limit=0')).status).toBe(422);
    expect((await revisions('no-such-article', author.token)).body).toEqual({ errors: { article: ['not found'] } });
  });

  it("shows only the article's own revisions: an unknown id or another article's is 404", async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author);
    const other = await write(author);
    const [otherRevision] = (await allRevisions(author, other.slug)).revisions;
    for (const id of [otherRevision!.id, 987654321]) {
      const response = await revision(article.slug, id, author.token);
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ errors: { revision: ['not found'] } });
      expect((await restore(article.slug, id, author.token)).body).toEqual({ errors: { revision: ['not found'] } });
    }
    for (const id of ['0', 'abc', '1.5']) expect((await revision(article.slug, id, author.token)).status).toBe(422);
  });

  it('restores a revision as an edit: content back, a new revision, the status kept, the slug following the title', async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author, { status: 'draft', title: 'Original title', body: 'Original body', tagList: ['x', 'y'] });
    const edited = await edit(author, article.slug, { title: 'Edited title', body: 'Edited body', tagList: ['z'], description: 'Changed' });
    expect(edited.slug).not.toBe(article.slug);
    const [, original] = (await allRevisions(author, edited.slug)).revisions;
    const events = async () =>
      Number(
        (
          await db()
            .selectFrom('events')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('type', '=', 'article.updated')
            .executeTakeFirstOrThrow()
        ).n,
      );
    const eventsBefore = await events();

    const restored = await restore(edited.slug, original!.id, author.token);
    expect(restored.status).toBe(200);
    expect(restored.body.article).toMatchObject({
      title: 'Original title',
      description: 'About it',
      body: 'Original body',
      tagList: ['x', 'y'],
      status: 'draft',
      publishedAt: null,
    });
    expect(restored.body.article.slug).toMatch(/^original-title/);
    expect(restored.body.article.updatedAt > edited.updatedAt).toBe(true);
    expect(await events()).toBe(eventsBefore + 1);
    // Its answer is the article as a GET shows it, with the ETag that GET would carry.
    const fetched = await call(app(), 'GET', `/api/articles/${restored.body.article.slug}`, { token: author.token });
    expect(fetched.body).toEqual(restored.body);
    expect(restored.headers.etag).toBe(fetched.headers.etag);
    expect(await call(app(), 'GET', `/api/articles/${edited.slug}`, { token: author.token })).toMatchObject({ status: 404 });

    const { revisions: kept } = await allRevisions(author, restored.body.article.slug);
    expect(kept).toHaveLength(3);
    expect(kept[0]).toEqual({ ...original, id: expect.any(Number), createdAt: restored.body.article.updatedAt });
    expect(kept[0]!.id).toBeGreaterThan(original!.id);

    // A published article stays published.
    const published = await edit(author, restored.body.article.slug, { status: 'published' });
    const again = await restore(published.slug, kept[1]!.id, author.token);
    expect(again.body.article).toMatchObject({ title: 'Edited title', status: 'published', publishedAt: published.publishedAt });
    // Restoring what is current already is an edit that changes nothing: it keeps no revision.
    const [newest] = (await allRevisions(author, again.body.article.slug)).revisions;
    expect((await restore(again.body.article.slug, newest!.id, author.token)).status).toBe(200);
    expect(await storedCount(again.body.article.slug)).toBe(4);
  });

  it('restores under If-Match like an edit: a stale copy is 412 and writes nothing', async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author);
    const read = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: author.token });
    await edit(author, article.slug, { body: 'Edited body' });
    const [, first] = (await allRevisions(author, article.slug)).revisions;
    const stale = await restore(article.slug, first!.id, author.token, { 'if-match': String(read.headers.etag) });
    expect(stale.status).toBe(412);
    expect(await storedCount(article.slug)).toBe(2);
    const current = await call(app(), 'GET', `/api/articles/${article.slug}`, { token: author.token });
    const fresh = await restore(article.slug, first!.id, author.token, { 'if-match': String(current.headers.etag) });
    expect(fresh.status).toBe(200);
    expect(fresh.body.article.body).toBe('The body');
  });

  it('keeps the newest 100 revisions, dropping the oldest first', { timeout: 60_000 }, async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author, { body: 'Body 0' });
    for (let n = 1; n <= 101; n++) await edit(author, article.slug, { body: `Body ${n}` });
    expect(await storedCount(article.slug)).toBe(100);
    const { revisions: kept, revisionsCount } = await allRevisions(author, article.slug);
    expect(revisionsCount).toBe(100);
    const bodies = await Promise.all(
      [kept[0]!, kept.at(-1)!].map(async (entry) => (await revision(article.slug, entry.id, author.token)).body.revision.body),
    );
    expect(bodies).toEqual(['Body 101', 'Body 2']);
  });

  it('hides the revisions of a draft and of a public article from everyone but the author: 404', async () => {
    const author = await registerUser(app(), 'author');
    const reader = await registerUser(app(), 'reader');
    const draft = await write(author, { status: 'draft' });
    const published = await write(author);
    // A reader who follows the author and favorited the article sees it, but not its revisions.
    await call(app(), 'POST', `/api/profiles/${author.username}/follow`, { token: reader.token });
    await call(app(), 'POST', `/api/articles/${published.slug}/favorite`, { token: reader.token });
    expect((await call(app(), 'GET', `/api/articles/${published.slug}`, { token: reader.token })).status).toBe(200);

    const notFound = { errors: { article: ['not found'] } };
    for (const article of [draft, published]) {
      const [only] = (await allRevisions(author, article.slug)).revisions;
      for (const token of [undefined, reader.token]) {
        expect(await revisions(article.slug, token)).toMatchObject({ status: 404, body: notFound });
        expect(await revision(article.slug, only!.id, token)).toMatchObject({ status: 404, body: notFound });
      }
      expect(await restore(article.slug, only!.id, reader.token)).toMatchObject({ status: 404, body: notFound });
      // Restoring is a write: without a token it is the 401 of every write.
      expect(await restore(article.slug, only!.id)).toMatchObject({ status: 401, body: { errors: { token: ['is missing'] } } });
    }
    expect(await storedCount(published.slug)).toBe(1);
  });

  it('deleting the article deletes its revisions', async () => {
    const author = await registerUser(app(), 'author');
    const article = await write(author);
    await edit(author, article.slug, { body: 'Edited body' });
    const { id } = await db().selectFrom('articles').select('id').where('slug', '=', article.slug).executeTakeFirstOrThrow();
    expect((await call(app(), 'DELETE', `/api/articles/${article.slug}`, { token: author.token })).status).toBe(204);
    const left = await db().selectFrom('article_revisions').select('id').where('article_id', '=', id).execute();
    expect(left).toEqual([]);
  });
});

for (const kind of DATABASES) {
  describe(`migration 0014 (article revisions) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });

    it('keeps one revision of every article there, dated at its last change, and can be reverted', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0013_article_lifecycle'));
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1)`.execute(handle.db);
      await sql`insert into articles (id, slug, title, description, body, author_id, tag_list, status, created_at, updated_at) values
        (1, 'one', 'One', 'd1', 'b1', 1, '["y", "x"]', 'published', 1, 10),
        (2, 'two', 'Two', 'd2', 'b2', 1, '[]', 'draft', 2, 20)`.execute(handle.db);
      const progress: string[] = [];
      unwrap(await createMigrator(handle, (message) => progress.push(message)).migrateTo('0014_article_revisions'));
      expect(progress).toEqual([expect.stringMatching(/^0014: a revision of each of 2 articles \(\d+\.\d s\)$/)]);
      const rows = await handle.db
        .selectFrom('article_revisions')
        .select(['article_id', 'title', 'description', 'body', 'tag_list', 'created_at'])
        .orderBy('article_id')
        .execute();
      expect(rows).toEqual([
        { article_id: 1, title: 'One', description: 'd1', body: 'b1', tag_list: '["y", "x"]', created_at: 10 },
        { article_id: 2, title: 'Two', description: 'd2', body: 'b2', tag_list: '[]', created_at: 20 },
      ]);
      unwrap(await createMigrator(handle).migrateDown());
      const tables = await handle.db.introspection.getTables();
      expect(tables.map((table) => table.name)).not.toContain('article_revisions');
    });
  });
}
