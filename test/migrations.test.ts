import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createMigrator, migrateToLatest, unwrap } from '../src/db/migrate.js';
import { listArticles } from '../src/modules/articles/list.js';
import { DATABASES, scratchHandle } from './support/app.js';
import { derivedDataMismatches, NO_MISMATCHES } from './support/invariants.js';

for (const kind of DATABASES) {
  describe(`migrations 0003 and 0005 (counts) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });

    it('fills every counter and copied creation time from the rows already there', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0002_idempotency_keys'));
      // Written as the schema before 0003 had it, so through raw SQL rather than the current typed schema.
      await sql`insert into users (id, username, username_key, email, email_key, password_hash, created_at, updated_at) values
        (1, 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1), (2, 'b', 'b', 'b@x.io', 'b@x.io', 'h', 1, 1)`.execute(handle.db);
      await sql`insert into articles (id, slug, title, description, body, author_id, favorites_count, created_at, updated_at) values
        (1, 's1', 't', 'd', 'b', 1, 2, 100, 100), (2, 's2', 't', 'd', 'b', 1, 1, 200, 200), (3, 's3', 't', 'd', 'b', 2, 0, 300, 300)`.execute(
        handle.db,
      );
      await sql`insert into tags (id, name, article_count) values (1, 'x', 2)`.execute(handle.db);
      await sql`insert into article_tags (article_id, tag_id) values (1, 1), (3, 1)`.execute(handle.db);
      await sql`insert into favorites (user_id, article_id, created_at) values (1, 1, 5), (2, 1, 5), (2, 2, 5)`.execute(handle.db);

      expect(unwrap(await createMigrator(handle).migrateTo('0003_list_counters')).map((result) => result.migrationName)).toEqual([
        '0003_list_counters',
      ]);
      const users = await handle.db.selectFrom('users').select(['id', 'articles_count', 'favorites_count']).orderBy('id').execute();
      expect(users).toEqual([
        { id: 1, articles_count: 2, favorites_count: 1 },
        { id: 2, articles_count: 1, favorites_count: 2 },
      ]);
      const { rows: links } = await sql`select article_id, article_created_at from article_tags order by article_id`.execute(handle.db);
      expect(links).toEqual([
        { article_id: 1, article_created_at: 100 },
        { article_id: 3, article_created_at: 300 },
      ]);

      // 0005 takes the counts over with triggers and totals the articles already there.
      unwrap(await createMigrator(handle).migrateTo('0005_counts_by_triggers'));
      expect(await derivedDataMismatches(handle.db, { listing: false })).toEqual(NO_MISMATCHES);
      unwrap(await createMigrator(handle).migrateDown());
      expect((await sql<{ value: unknown }>`select value from counters where name = 'articles'`.execute(handle.db)).rows).toEqual([
        { value: 3 },
      ]);
      unwrap(await createMigrator(handle).migrateUp());
      expect(await derivedDataMismatches(handle.db, { listing: false })).toEqual(NO_MISMATCHES);

      // Rows changed by hand in SQL, cascades included, keep every count exact.
      await sql`insert into favorites (user_id, article_id, article_created_at, created_at) values (1, 3, 300, 6)`.execute(handle.db);
      await sql`insert into article_tags (article_id, tag_id, article_created_at) values (2, 1, 200)`.execute(handle.db);
      await sql`delete from articles where id = 1`.execute(handle.db);
      expect(await derivedDataMismatches(handle.db, { listing: false })).toEqual(NO_MISMATCHES);
      expect(await handle.db.selectFrom('tags').select('article_count').executeTakeFirstOrThrow()).toEqual({ article_count: 2 });
    });
  });

  describe(`migration 0007 (username skeletons) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });

    it('gives every account its skeleton, marks the later of two lookalikes with its id, and makes skeletons unique', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0006_tag_list_order'));
      // Lookalikes registered before the rule: Latin and Cyrillic "paypal", and "Ivan" / "lvan".
      const names = ['paypal', 'p\u0430yp\u0430l', 'Ivan', 'lvan', 'zoë'];
      for (const [index, name] of names.entries()) {
        await sql`insert into users (id, username, username_key, email, email_key, password_hash, created_at, updated_at)
          values (${index + 1}, ${name}, ${name.toLowerCase()}, ${`${index}@x.io`}, ${`${index}@x.io`}, 'h', 1, 1)`.execute(handle.db);
      }
      unwrap(await createMigrator(handle).migrateTo('0007_username_skeletons'));
      const rows = await handle.db.selectFrom('users').select(['id', 'username_skeleton']).orderBy('id').execute();
      expect(rows.map((row) => row.username_skeleton)).toEqual(['paypal', 'paypal#2', 'lvan', 'lvan#4', 'zoe\u0308']);
      const lookalike = handle.db
        .insertInto('users')
        .values({
          username: 'x',
          username_key: 'x',
          username_skeleton: 'lvan',
          email: 'x',
          email_key: 'x',
          password_hash: 'h',
          created_at: 1,
          updated_at: 1,
        })
        .execute();
      await expect(lookalike).rejects.toThrow();
      unwrap(await createMigrator(handle).migrateDown());
      unwrap(await createMigrator(handle).migrateUp());
      expect(
        (await handle.db.selectFrom('users').select('username_skeleton').where('id', '=', 2).executeTakeFirstOrThrow()).username_skeleton,
      ).toBe('paypal#2');
    });
  });

  describe(`migration 0019 (confusables of Unicode 17) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });

    it("recomputes every skeleton with today's table, marking the later of two names it finds alike", async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0018_moderation'));
      // As the Unicode 10 table left them: it had no prototype for Middle Scots S (Unicode 14), so "gauꟖ" got in
      // beside "gauß"; the third skeleton is one no table gives, which the migration must not keep either.
      const rows: Array<[string, string]> = [
        ['gau\u00df', 'gau\u00df'],
        ['gau\ua7d6', 'gau\ua7d7'],
        ['paypal', 'stale'],
      ];
      for (const [index, [name, skeleton]] of rows.entries()) {
        await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
          values (${index + 1}, ${name}, ${name.toLowerCase()}, ${skeleton}, ${`${index}@x.io`}, ${`${index}@x.io`}, 'h', 1, 1)`.execute(
          handle.db,
        );
      }
      unwrap(await createMigrator(handle).migrateTo('0019_confusables_unicode_17'));
      const skeletons = await handle.db.selectFrom('users').select('username_skeleton').orderBy('id').execute();
      expect(skeletons.map((row) => row.username_skeleton)).toEqual(['gau\u00df', 'gau\u00df#2', 'paypal']);
      const lookalike =
        sql`insert into users (username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values ('x', 'x', 'paypal', 'x', 'x', 'h', 1, 1)`.execute(handle.db);
      await expect(lookalike).rejects.toThrow();
    });
  });

  describe(`migration 0008 (route words as slugs) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });

    it('renames an article whose slug is a route word, to a slug that is free', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0007_username_skeletons'));
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1)`.execute(handle.db);
      await sql`insert into articles (id, slug, title, description, body, author_id, created_at, updated_at) values
        (1, 'feed', 'Feed', 'd', 'b', 1, 1, 1), (2, 'feed-article', 'Feed article', 'd', 'b', 1, 2, 2)`.execute(handle.db);
      unwrap(await createMigrator(handle).migrateTo('0008_route_word_slugs'));
      const slugs = await handle.db.selectFrom('articles').select(['id', 'slug']).orderBy('id').execute();
      expect(slugs).toEqual([
        { id: 1, slug: 'feed-article-1' },
        { id: 2, slug: 'feed-article' },
      ]);
    });
  });

  describe(`migration 0011 (article search) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });
    const titlesFound = async (q: string) => {
      const { articles } = await listArticles(database().db, { q }, { limit: 10, offset: 0 }, null);
      return articles.map((article) => article.title);
    };

    it('indexes the articles already there, saying how far it is, and can be reverted and applied again', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0010_webhook_queue'));
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1)`.execute(handle.db);
      await sql`insert into articles (id, slug, title, description, body, author_id, tag_list, created_at, updated_at) values
        (1, 'one', 'Über Café', 'd', 'first body', 1, '["alpha"]', 1, 1),
        (2, 'two', 'Second', 'd', 'second body mentions cafe', 1, '[]', 2, 2)`.execute(handle.db);
      const progress: string[] = [];
      unwrap(await createMigrator(handle, (message) => progress.push(message)).migrateTo('0011_article_search'));
      expect(progress).toEqual(['search index: 2 of 2 articles']);
      // The search is asked through today's code, which needs the later migrations too.
      await migrateToLatest(handle);
      expect(await titlesFound('cafe')).toEqual(['Über Café', 'Second']);
      expect(await titlesFound('alpha')).toEqual(['Über Café']);

      unwrap(await createMigrator(handle).migrateTo('0010_webhook_queue'));
      await migrateToLatest(handle);
      expect(await titlesFound('uber')).toEqual(['Über Café']);
    });
  });

  describe(`migration 0012 (tag lists written with the article) [${kind}]`, () => {
    const database = scratchHandle(kind);

    it('leaves a list that already names the tag alone, and still follows links written by hand', async () => {
      const { db } = database();
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1)`.execute(db);
      await sql`insert into tags (id, name) values (1, 'x'), (2, 'y')`.execute(db);
      // Spaced as no trigger writes it: a rewrite would show.
      await sql`insert into articles (id, slug, title, description, body, author_id, tag_list, created_at, updated_at) values
        (1, 'listed', 't', 'd', 'b', 1, '[ "x" ]', 1, 1), (2, 'unlisted', 't', 'd', 'b', 1, '[]', 2, 2)`.execute(db);
      await sql`insert into article_tags (article_id, tag_id, article_listed_at) values (1, 1, 1), (2, 2, 2)`.execute(db);
      const lists = () => db.selectFrom('articles').select(['id', 'tag_list']).orderBy('id').execute();
      expect(await lists()).toEqual([
        { id: 1, tag_list: '[ "x" ]' },
        { id: 2, tag_list: '["y"]' },
      ]);
      await sql`delete from article_tags where article_id = 1`.execute(db);
      await sql`update articles set tag_list = '[]' where id = 2`.execute(db);
      await sql`delete from article_tags where article_id = 2`.execute(db);
      expect(await lists()).toEqual([
        { id: 1, tag_list: '[]' },
        { id: 2, tag_list: '[]' },
      ]);
    });
  });

  describe(`migration 0021 (the profile's own time) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });

    it("starts each profile's time at the account's, and can be reverted", async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0020_webhook_fair_share'));
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1000), (2, 'b', 'b', 'b', 'b@x.io', 'b@x.io', 'h', 2, 2000)`.execute(
        handle.db,
      );
      unwrap(await createMigrator(handle).migrateTo('0021_profile_time'));
      const times = await handle.db.selectFrom('users').select(['id', 'profile_updated_at']).orderBy('id').execute();
      expect(times.map((row) => [row.id, Number(row.profile_updated_at)])).toEqual([
        [1, 1000],
        [2, 2000],
      ]);
      unwrap(await createMigrator(handle).migrateDown());
      const columns = await sql<{ id: number }>`select * from users`.execute(handle.db);
      expect(Object.keys(columns.rows[0]!)).not.toContain('profile_updated_at');
      await migrateToLatest(handle);
    });
  });

  describe(`migration 0022 (the screened ids beside each account) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });
    const screened = async () =>
      Object.fromEntries(
        (await database().db.selectFrom('users').select(['id', 'screened_ids']).orderBy('id').execute()).map((row) => [
          row.id,
          (typeof row.screened_ids === 'string' ? JSON.parse(row.screened_ids) : row.screened_ids).sort(),
        ]),
      );

    it('fills in the blocks and mutes already there, keeps them as they change, and can be reverted', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0021_profile_time'));
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1), (2, 'b', 'b', 'b', 'b@x.io', 'b@x.io', 'h', 1, 1),
          (3, 'c', 'c', 'c', 'c@x.io', 'c@x.io', 'h', 1, 1), (4, 'd', 'd', 'd', 'd@x.io', 'd@x.io', 'h', 1, 1)`.execute(handle.db);
      await sql`insert into blocks (blocker_id, blocked_id, created_at) values (1, 2, 1)`.execute(handle.db);
      await sql`insert into mutes (muter_id, muted_id, created_at) values (1, 3, 1)`.execute(handle.db);
      unwrap(await createMigrator(handle).migrateTo('0022_screened_ids'));
      // Blocks either way, the user's own mutes: the muted user screens nobody for it.
      expect(await screened()).toEqual({ 1: [2, 3], 2: [1], 3: [], 4: [] });
      await sql`insert into blocks (blocker_id, blocked_id, created_at) values (4, 1, 1)`.execute(handle.db);
      await sql`insert into mutes (muter_id, muted_id, created_at) values (3, 4, 1)`.execute(handle.db);
      await sql`delete from blocks where blocker_id = 1 and blocked_id = 2`.execute(handle.db);
      expect(await screened()).toEqual({ 1: [3, 4], 2: [], 3: [4], 4: [1] });
      await sql`delete from mutes where muter_id = 1`.execute(handle.db);
      expect(await screened()).toEqual({ 1: [4], 2: [], 3: [4], 4: [1] });
      unwrap(await createMigrator(handle).migrateDown());
      const columns = await sql<{ id: number }>`select * from users`.execute(handle.db);
      expect(Object.keys(columns.rows[0]!)).not.toContain('screened_ids');
      // Its triggers went with it: blocks are written as before.
      await sql`insert into blocks (blocker_id, blocked_id, created_at) values (2, 3, 1)`.execute(handle.db);
      await migrateToLatest(handle);
      expect((await screened())[2]).toEqual([3]);
    });
  });

  describe(`migration 0017 (scheduled articles' link keys) on existing data [${kind}]`, () => {
    const database = scratchHandle(kind, { migrate: false });
    const links = (table: 'article_tags' | 'favorites') =>
      sql<{
        article_id: number;
        article_listed_at: number | null;
      }>`select article_id, article_listed_at from ${sql.table(table)} order by article_id`
        .execute(database().db)
        .then(({ rows }) =>
          rows.map((row) => [Number(row.article_id), row.article_listed_at === null ? null : Number(row.article_listed_at)]),
        );
    const counts = async () =>
      (
        await sql<{ n: number }>`select article_count as n from tags union all select favorites_count from users`.execute(database().db)
      ).rows.map((row) => Number(row.n));

    it('gives the links of scheduled articles their publishAt, counts what was counted, and can be reverted', async () => {
      const handle = database();
      unwrap(await createMigrator(handle).migrateTo('0016_account_export'));
      const now = Date.now();
      await sql`insert into users (id, username, username_key, username_skeleton, email, email_key, password_hash, created_at, updated_at)
        values (1, 'a', 'a', 'a', 'a@x.io', 'a@x.io', 'h', 1, 1)`.execute(handle.db);
      await sql`insert into tags (id, name) values (1, 'x')`.execute(handle.db);
      // Published; scheduled and due but not yet recorded; scheduled later; a draft; published but withheld.
      await sql`insert into articles (id, slug, title, description, body, author_id, tag_list, created_at, updated_at,
          status, publish_at, published_at, withheld, listed_at) values
        (1, 'published', 't', 'd', 'b', 1, '[]', 1, 1, 'published', null, 10, 0, 10),
        (2, 'due', 't', 'd', 'b', 1, '[]', 2, 2, 'scheduled', ${now - 60_000}, null, 0, ${now - 60_000}),
        (3, 'later', 't', 'd', 'b', 1, '[]', 3, 3, 'scheduled', ${now + 3_600_000}, null, 0, ${now + 3_600_000}),
        (4, 'draft', 't', 'd', 'b', 1, '[]', 4, 4, 'draft', null, null, 0, null),
        (5, 'withheld', 't', 'd', 'b', 1, '[]', 5, 5, 'published', null, 50, 1, null)`.execute(handle.db);
      for (const table of ['article_tags', 'favorites'] as const) {
        const owner = table === 'article_tags' ? sql`tag_id` : sql`user_id, created_at`;
        const also = table === 'article_tags' ? sql`` : sql`, 1`;
        await sql`insert into ${sql.table(table)} (article_id, ${owner}, article_listed_at)
          values (1, 1${also}, 10), (2, 1${also}, null), (3, 1${also}, null), (4, 1${also}, null), (5, 1${also}, null)`.execute(handle.db);
      }
      const before = { tags: await links('article_tags'), favorites: await links('favorites'), counts: await counts() };
      expect(before.counts).toEqual([1, 1]);

      unwrap(await createMigrator(handle).migrateTo('0017_scheduled_link_keys'));
      const keyed = [
        [1, 10],
        [2, now - 60_000],
        [3, now + 3_600_000],
        [4, null],
        [5, null],
      ];
      expect(await links('article_tags')).toEqual(keyed);
      expect(await links('favorites')).toEqual(keyed);
      expect(await counts()).toEqual([1, 1]);
      expect(await derivedDataMismatches(handle.db)).toEqual(NO_MISMATCHES);
      // Counted once recorded.
      await sql`update articles set status = 'published', published_at = publish_at where id = 2`.execute(handle.db);
      expect(await counts()).toEqual([2, 2]);
      expect(await derivedDataMismatches(handle.db)).toEqual(NO_MISMATCHES);
      await sql`update articles set status = 'scheduled', published_at = null where id = 2`.execute(handle.db);

      unwrap(await createMigrator(handle).migrateTo('0016_account_export'));
      expect({ tags: await links('article_tags'), favorites: await links('favorites'), counts: await counts() }).toEqual(before);
      await migrateToLatest(handle);
      expect(await links('article_tags')).toEqual(keyed);
      expect(await derivedDataMismatches(handle.db)).toEqual(NO_MISMATCHES);
      // The due article is in the tag's list and the favorites, from the links alone (read with today's code, so on
      // today's schema).
      const slugs = async (filters: { tag?: string; favorited?: string }) =>
        (await listArticles(handle.db, filters, { limit: 10, offset: 0 }, null)).articles.map((article) => article.slug);
      expect(await slugs({ tag: 'x' })).toEqual(['due', 'published']);
      expect(await slugs({ favorited: 'a' })).toEqual(['due', 'published']);
    });
  });
}
