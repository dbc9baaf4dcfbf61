import { afterAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DATABASES, type ScratchDatabase, withDatabase } from './support/app.js';
import { unique } from './support/client.js';
import { derivedDataMismatches, NO_MISMATCHES } from './support/invariants.js';
import { childEnv, NO_RATE_LIMITS, request, SERVER_ENTRY, startServer } from './support/processes.js';

const CLIENTS = 8;
/** Killed once this many article creates are acknowledged, however long a busy machine takes to get there. */
const ARTICLES_BEFORE_KILL = 40;
const LOAD_LIMIT_MS = 20_000;
/** Shared by many articles, so that concurrent creates update the same tag counters. */
const SHARED_TAGS = ['crash', 'durable', 'journal', 'commit', 'restart'];

/** Every write the load sent, and whether the server acknowledged it with a 2xx before it was killed. */
interface Journal {
  users: Array<{ username: string; acked: boolean }>;
  articles: Array<{ title: string; author: string; tags: string[]; slug?: string; acked: boolean }>;
  favorites: Array<{ username: string; token: string; slug: string; acked: boolean }>;
  comments: Array<{ body: string; slug: string; id?: number; acked: boolean }>;
  /** Answers other than 2xx while the server was up: there should be none. */
  refused: Array<{ url: string; status: number; body: unknown }>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pick = <T>(items: T[]): T | undefined => items[Math.floor(Math.random() * items.length)];

/**
 * One client writing until the server stops answering: it signs up (again every few rounds, so registrations
 * stay in the mix), creates articles with tags, favorites and comments on anyone's acknowledged articles.
 * Resolves with the moment its connection failed.
 */
async function runClient(base: string, journal: Journal, index: number): Promise<number> {
  let token = '';
  let username = '';
  // Journals the write first, so that one cut short by the kill still counts as sent.
  const write = async <T extends { acked: boolean }>(list: T[], entry: T, method: string, url: string, body?: unknown) => {
    list.push(entry);
    const response = await request(base, method, url, { token, body });
    if (response.status >= 200 && response.status < 300) entry.acked = true;
    else journal.refused.push({ url, status: response.status, body: response.body });
    return response.body;
  };
  try {
    for (let round = 0; ; round++) {
      if (round % 4 === 0) {
        const user = { username: unique('crash'), acked: false };
        const email = `${user.username}@example.com`;
        const answer = await write(journal.users, user, 'POST', '/api/users', {
          user: { username: user.username, email, password: 'password123' },
        });
        if (user.acked) ({ token, username } = answer.user);
      }
      if (token === '') continue;

      const tags = [
        ...new Set([SHARED_TAGS[round % SHARED_TAGS.length]!, SHARED_TAGS[(round + index) % SHARED_TAGS.length]!, unique('own')]),
      ].sort();
      const article = { title: unique('Crash '), author: username, tags, acked: false } as Journal['articles'][number];
      const created = await write(journal.articles, article, 'POST', '/api/articles', {
        article: { title: article.title, description: 'Written under load', body: 'Until the kill', tagList: tags },
      });
      if (article.acked) article.slug = created.article.slug;

      const acked = journal.articles.filter((entry) => entry.slug !== undefined);
      const favoriteSlug = pick(acked)!.slug!;
      await write(
        journal.favorites,
        { username, token, slug: favoriteSlug, acked: false },
        'POST',
        `/api/articles/${favoriteSlug}/favorite`,
      );

      const comment = { body: unique('comment '), slug: pick(acked)!.slug!, acked: false } as Journal['comments'][number];
      const posted = await write(journal.comments, comment, 'POST', `/api/articles/${comment.slug}/comments`, {
        comment: { body: comment.body },
      });
      if (comment.acked) comment.id = posted.comment.id;
    }
  } catch {
    return Date.now();
  }
}

/** What the database holds, read directly: counters are checked against the rows they count. */
function readTables(url: string) {
  return withDatabase(url, async ({ db }) => ({
    users: await db.selectFrom('users').select(['id', 'username']).execute(),
    articles: await db.selectFrom('articles').select(['id', 'slug', 'title', 'favorites_count']).execute(),
    tags: await db.selectFrom('tags').select(['id', 'name', 'article_count']).execute(),
    articleTags: await db.selectFrom('article_tags').select(['article_id', 'tag_id']).execute(),
    favorites: await db.selectFrom('favorites').select(['user_id', 'article_id']).execute(),
    comments: await db.selectFrom('comments').select(['id', 'article_id', 'body']).execute(),
    events: await db.selectFrom('events').select(['type', 'actor_id', 'owner_id', 'article_id', 'data']).execute(),
    mismatches: await derivedDataMismatches(db),
  }));
}

for (const kind of DATABASES) {
  describe(`a server killed with SIGKILL under concurrent writes [${kind}]`, () => {
    let scratch: ScratchDatabase | undefined;

    afterAll(async () => {
      await scratch?.drop();
    });

    it('has kept every acknowledged write after a restart, and nothing half-written', async () => {
      scratch = await createScratchDatabase(kind);
      const env = childEnv(scratch.url, NO_RATE_LIMITS);
      const journal: Journal = { users: [], articles: [], favorites: [], comments: [], refused: [] };

      const first = await startServer(SERVER_ENTRY, [], env);
      const loadStarted = Date.now();
      const clients = Array.from({ length: CLIENTS }, (_, index) => runClient(first.base, journal, index));
      const deadline = Date.now() + LOAD_LIMIT_MS;
      while (journal.articles.filter((entry) => entry.acked).length < ARTICLES_BEFORE_KILL && Date.now() < deadline) await sleep(10);
      const killedAt = Date.now();
      await first.stop('SIGKILL');
      // Every client wrote until the kill: none stopped early on an error of its own.
      for (const stoppedAt of await Promise.all(clients)) expect(stoppedAt).toBeGreaterThanOrEqual(killedAt);
      expect(journal.refused).toEqual([]);

      const second = await startServer(SERVER_ENTRY, [], env);
      try {
        // Acknowledged writes, as clients see them through the restarted server.
        for (const user of journal.users.filter((entry) => entry.acked)) {
          expect((await request(second.base, 'GET', `/api/profiles/${user.username}`)).status, user.username).toBe(200);
        }
        for (const article of journal.articles.filter((entry) => entry.acked)) {
          const found = await request(second.base, 'GET', `/api/articles/${article.slug}`);
          expect(found.status, article.title).toBe(200);
          expect(found.body.article).toMatchObject({ title: article.title, tagList: article.tags, author: { username: article.author } });
        }
        for (const favorite of journal.favorites.filter((entry) => entry.acked)) {
          const found = await request(second.base, 'GET', `/api/articles/${favorite.slug}`, { token: favorite.token });
          expect(found.body.article.favorited, `${favorite.username} -> ${favorite.slug}`).toBe(true);
        }
        const ackedComments = journal.comments.filter((entry) => entry.acked);
        for (const slug of new Set(ackedComments.map((comment) => comment.slug))) {
          const listed = await request(second.base, 'GET', `/api/articles/${slug}/comments`);
          const ids = new Set(listed.body.comments.map((comment: { id: number }) => comment.id));
          for (const comment of ackedComments.filter((entry) => entry.slug === slug)) expect(ids.has(comment.id), comment.body).toBe(true);
        }
      } finally {
        await second.stop('SIGTERM');
      }

      // Every row against the journal and every counter against the rows it counts, unacknowledged writes included.
      const tables = await readTables(scratch.url);
      expect(tables.mismatches).toEqual(NO_MISMATCHES);

      const tagNames = new Map(tables.tags.map((tag) => [tag.id, tag.name]));
      const sent = new Map(journal.articles.map((article) => [article.title, article]));
      for (const row of tables.articles) {
        const links = tables.articleTags
          .filter((link) => link.article_id === row.id)
          .map((link) => tagNames.get(link.tag_id))
          .sort();
        expect(links, row.title).toEqual(sent.get(row.title)?.tags);
      }

      const slugOf = new Map(tables.articles.map((row) => [row.id, row.slug]));
      const commentsSent = new Set(journal.comments.map((comment) => `${comment.slug} ${comment.body}`));
      for (const row of tables.comments) expect(commentsSent.has(`${slugOf.get(row.article_id)} ${row.body}`), row.body).toBe(true);
      const usernameOf = new Map(tables.users.map((row) => [row.id, row.username]));
      const favoritesSent = new Set(journal.favorites.map((favorite) => `${favorite.username} ${favorite.slug}`));
      for (const row of tables.favorites) {
        expect(favoritesSent.has(`${usernameOf.get(row.user_id)} ${slugOf.get(row.article_id)}`)).toBe(true);
      }

      // The outbox is exact too: every row has the one event its write appended, and no event speaks of a row that is
      // not there (a write the kill cut short took its event with it).
      const eventsOf = (type: string) => tables.events.filter((event) => event.type === type);
      const createdArticles = eventsOf('article.created').map((event) => event.article_id);
      expect(createdArticles.sort()).toEqual(tables.articles.map((row) => row.id).sort());
      const createdComments = eventsOf('comment.created').map(
        (event) => (JSON.parse(event.data) as { comment: { id: number } }).comment.id,
      );
      expect(createdComments.sort()).toEqual(tables.comments.map((row) => row.id).sort());
      const favorited = eventsOf('article.favorited').map((event) => `${event.actor_id} ${event.article_id}`);
      expect(favorited.sort()).toEqual(tables.favorites.map((row) => `${row.user_id} ${row.article_id}`).sort());
      expect(
        eventsOf('user.registered')
          .map((event) => event.owner_id)
          .sort(),
      ).toEqual(tables.users.map((row) => row.id).sort());

      const usernames = new Set(usernameOf.values());
      const titles = new Set(tables.articles.map((row) => row.title));
      const favoritePairs = new Set(tables.favorites.map((row) => `${usernameOf.get(row.user_id)} ${slugOf.get(row.article_id)}`));
      const commentBodies = new Set(tables.comments.map((row) => row.body));
      const tally = <T extends { acked: boolean }>(entries: T[], stored: (entry: T) => boolean) => {
        const acked = entries.filter((entry) => entry.acked);
        const inFlight = entries.filter((entry) => !entry.acked);
        return {
          acked: acked.length,
          ackedFound: acked.filter(stored).length,
          inFlight: inFlight.length,
          inFlightFound: inFlight.filter(stored).length,
        };
      };
      const figures = {
        users: tally(journal.users, (user) => usernames.has(user.username)),
        articles: tally(journal.articles, (article) => titles.has(article.title)),
        favorites: tally(journal.favorites, (favorite) => favoritePairs.has(`${favorite.username} ${favorite.slug}`)),
        comments: tally(journal.comments, (comment) => commentBodies.has(comment.body)),
      };
      console.log(
        `[crash ${kind}] ${CLIENTS} clients, SIGKILL after ${killedAt - loadStarted} ms; acknowledged / found after restart, ` +
          `then unacknowledged (in flight) / found: ` +
          Object.entries(figures)
            .map(([name, f]) => `${name} ${f.acked}/${f.ackedFound}, ${f.inFlight}/${f.inFlightFound}`)
            .join('; ') +
          `; counters checked on ${tables.articles.length} articles and ${tables.tags.length} tags`,
      );
      for (const [name, f] of Object.entries(figures)) expect(f.ackedFound, name).toBe(f.acked);
      expect(figures.articles.acked).toBeGreaterThanOrEqual(ARTICLES_BEFORE_KILL);
      expect(figures.users.inFlight + figures.articles.inFlight + figures.favorites.inFlight + figures.comments.inFlight).toBeGreaterThan(
        0,
      );
    });
  });
}
