import { type ExpressionBuilder, type RawBuilder, type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import { dialectOf, type Executor } from '../../db/index.js';
import { preparedQuery } from '../../db/prepared.js';
import type { ArticleStatus, Database } from '../../db/schema.js';
import { isQueryCanceled } from '../../db/unavailable.js';
import { usernameKey } from '../../identity.js';
import { type ScreenedList, type Screening, screenedAmong, screenedList } from '../profiles/blocks.js';
import { presentTo } from '../profiles/queries.js';
import { decodeListCursor, encodeListCursor, type RelevanceCursor } from './list-cursor.js';
import {
  asPostgresSearch,
  BM25_MATCHES_MAX,
  fts5Phrases,
  fts5Query,
  parseSearch,
  SEARCH_CANDIDATES,
  type Search,
  SNIPPET_SCAN,
  snippetHtml,
  tsQuery,
} from './search.js';
import { toSummary, withArticleView } from './view.js';
import { instant, publicArticles, publicLinkAt } from './visibility.js';

export interface ArticleFilters {
  tag?: string;
  author?: string;
  favorited?: string;
  /** Only articles by authors this user follows (the feed). */
  followedBy?: number;
  /** Search text (search.ts): ranks the matches by relevance instead of listing them newest first. */
  q?: string;
  /**
   * Leaves out the articles of the authors this viewer screens (profiles/blocks.ts), and the lists named after them;
   * set only for a viewer who screens anyone, so that everyone else's lists carry no such condition.
   */
  screenedBy?: Screening;
}

export interface Page {
  /**
   * Written into the SQL, not bound: SQLite plans a page twice as fast when it knows its size, and the schema bounds
   * it (1 to PAGE_SIZE_MAX), so there are few texts to prepare. The offset, unbounded, stays a parameter.
   */
  limit: number;
  offset: number;
  /** A `nextCursor` from an earlier page: the page starts after it, found through the index whatever its depth. */
  cursor?: string;
}

/**
 * The filters as the statements bind them, the list's statement prepared once per shape (db/prepared.ts): names
 * folded to the key users are found by, the screened authors as their one parameter, and the instant the
 * visibility rule reads. An empty filter is no filter.
 */
interface ListValues {
  now: number;
  tag?: string;
  authorKey?: string;
  favoritedKey?: string;
  followedBy?: number;
  screened?: ScreenedList;
}

/** A page's values besides the filters'. */
interface PageValues extends ListValues {
  offset: number;
  /** The cursor's article (its key and id), when the page starts after one. */
  cursorAt?: number;
  cursorId?: number;
  /** On PostgreSQL's feed, how many of each followed author's newest articles can reach the page (feedPageIds). */
  perAuthor?: number;
  viewerId?: number;
}

const listValues = (db: Executor, filters: ArticleFilters, now: number): ListValues => ({
  now,
  tag: filters.tag || undefined,
  authorKey: filters.author ? usernameKey(filters.author) : undefined,
  favoritedKey: filters.favorited ? usernameKey(filters.favorited) : undefined,
  followedBy: filters.followedBy,
  screened: filters.screenedBy && screenedList(db, filters.screenedBy),
});

/** Newest articles PostgreSQL searches first (newestPostgresMatches). */
const RECENT_WINDOW = 20_000;
/** How long PostgreSQL may look for older matches before the search ranks the newer ones it has. */
const OLDER_MATCHES_TIMEOUT_MS = 200;

/**
 * Rows after the cursor's (at, id), in a newest-first order on (time, id): a range of the same index the order reads,
 * so page 5,000 costs what page 1 costs, and articles published meanwhile (newer) cannot shift the pages that follow.
 */
export const olderThan = (time: string, id: string, at: number, cursorId: number) =>
  sql<SqlBool>`(${sql.ref(time)}, ${sql.ref(id)}) < (${instant(at)}, ${cursorId})`;

/**
 * A filter's user; none for an account that is leaving (users/leaving.ts), whose articles are withheld anyway: what
 * it favorited is out of public lists as it is, and so for its owner too, who has GET /api/user/articles. None either
 * for an account the viewer screens: their articles and favorites are nothing the viewer sees.
 */
const userByName = (db: Executor, usernameKey: string, screened: ScreenedList | undefined) =>
  db
    .selectFrom('users')
    .where('users.username_key', '=', usernameKey)
    .where((eb) => presentTo(eb, null))
    .$if(screened !== undefined, (query) => query.where('users.id', 'not in', screenedAmong(db, screened!)));

const userIdByName = (db: Executor, usernameKey: string, screened: ScreenedList | undefined) =>
  userByName(db, usernameKey, screened).select('users.id');

const tagIdByName = (db: Executor, name: string) => db.selectFrom('tags').select('tags.id').where('tags.name', '=', name);

const articleIdsTagged = (db: Executor, tag: string) =>
  db.selectFrom('article_tags').select('article_tags.article_id').where('article_tags.tag_id', '=', tagIdByName(db, tag));

const articleIdsFavoritedBy = (db: Executor, usernameKey: string, screened: ScreenedList | undefined) =>
  db
    .selectFrom('favorites')
    .select('favorites.article_id')
    .where('favorites.user_id', '=', userIdByName(db, usernameKey, screened));

/**
 * The articles of the authors the viewer screens, from the author index: what a list read off a link table leaves
 * out, and what its kept count subtracts. One set per statement, so a page costs the links it walks plus what the
 * screened authors wrote (a correlated check per walked link cost a tag page 3 times as much: SQLite rebuilt the
 * screened set for every link).
 */
const screenedArticleIds = (db: Executor, screened: ScreenedList) =>
  db.selectFrom('articles').select('articles.id').where('articles.author_id', 'in', screenedAmong(db, screened));

/** For a list read off a link table aliased `link`: the link's article is not by an author the viewer screens. */
const linkUnscreened = (db: Executor, screened: ScreenedList) =>
  sql<SqlBool>`${sql.ref('link.article_id')} not in ${screenedArticleIds(db, screened)}`;

/**
 * The ids of one page and one more (which says whether another follows), newest published first, read from the
 * index that already holds the first filter's public rows in that order, so a page costs its offset plus limit index
 * entries whatever the number of matches: a tag's links and a user's favorites carry the article's listed_at for this
 * (visibility.ts); an author's articles have their own index. The other filters, when combined, narrow the walk.
 */
function pageIds(db: Executor, values: PageValues, limit: number) {
  const { cursorAt, cursorId } = values;
  if (values.favoritedKey !== undefined || values.tag !== undefined) {
    const links =
      values.favoritedKey !== undefined
        ? db
            .selectFrom('favorites as link')
            .where('link.user_id', '=', userIdByName(db, values.favoritedKey, values.screened))
            .$if(values.tag !== undefined, (query) => query.where('link.article_id', 'in', articleIdsTagged(db, values.tag!)))
        : db.selectFrom('article_tags as link').where('link.tag_id', '=', tagIdByName(db, values.tag!));
    const narrowed =
      values.authorKey !== undefined || values.followedBy !== undefined
        ? links.where(
            'link.article_id',
            'in',
            filteredArticles(db, { now: values.now, authorKey: values.authorKey, followedBy: values.followedBy }).select('articles.id'),
          )
        : links;
    return narrowed
      .where(publicLinkAt(values.now))
      .$if(values.screened !== undefined, (query) => query.where(linkUnscreened(db, values.screened!)))
      .$if(cursorAt !== undefined, (query) => query.where(olderThan('link.article_listed_at', 'link.article_id', cursorAt!, cursorId!)))
      .select('link.article_id as id')
      .orderBy('link.article_listed_at', 'desc')
      .orderBy('link.article_id', 'desc')
      .limit(sql.lit(limit + 1))
      .offset(values.offset);
  }
  if (values.followedBy !== undefined && values.authorKey === undefined && dialectOf(db) === 'postgres') {
    return feedPageIds(db, values, limit);
  }
  return filteredArticles(db, values)
    .$if(cursorAt !== undefined, (query) => query.where(olderThan('articles.listed_at', 'articles.id', cursorAt!, cursorId!)))
    .select('articles.id')
    .orderBy('articles.listed_at', 'desc')
    .orderBy('articles.id', 'desc')
    .limit(sql.lit(limit + 1))
    .offset(values.offset);
}

/**
 * A PostgreSQL feed page: each followed author contributes at most offset + limit of their newest articles (one
 * bounded walk of the author index each), and only those candidates are sorted. Following a prolific author
 * therefore costs no more than following a quiet one, and the LATERAL join spells that walk out, so the plan cannot
 * turn into a scan of all articles when the statistics are stale. SQLite's planner does the same walk for the plain
 * `author_id IN (followed)` of `filteredArticles`, stopping each author's range once it cannot reach the page, with
 * or without statistics (EXPLAIN QUERY PLAN on a copy with sqlite_stat1 dropped); at 1 M articles a page 1 takes
 * 20-26 µs that way against 33-37 µs for a correlated bound per author.
 */
function feedPageIds(db: Executor, values: PageValues, limit: number) {
  const { cursorAt, cursorId, screened } = values;
  return db
    .selectFrom('follows')
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom('articles')
          .select(['articles.id', 'articles.listed_at'])
          .whereRef('articles.author_id', '=', 'follows.followed_id')
          .where('articles.listed_at', '<=', instant(values.now))
          .$if(cursorAt !== undefined, (query) => query.where(olderThan('articles.listed_at', 'articles.id', cursorAt!, cursorId!)))
          .orderBy('articles.listed_at', 'desc')
          .orderBy('articles.id', 'desc')
          .limit(values.perAuthor!)
          .as('newest'),
      (join) => join.onTrue(),
    )
    .select('newest.id')
    .where('follows.follower_id', '=', values.followedBy!)
    .$if(screened !== undefined, (query) => query.where('follows.followed_id', 'not in', screenedAmong(db, screened!)))
    .orderBy('newest.listed_at', 'desc')
    .orderBy('newest.id', 'desc')
    .limit(sql.lit(limit + 1))
    .offset(values.offset);
}

/** The public articles, but those by the authors the viewer screens, when they screen anyone. */
const unscreenedArticles = (db: Executor, screened: ScreenedList | undefined, now: number) =>
  publicArticles(db, now).$if(screened !== undefined, (query) => query.where('articles.author_id', 'not in', screenedAmong(db, screened!)));

/** The public articles matching every filter (AND); what a combined filter's total counts. */
function filteredArticles(db: Executor, values: ListValues) {
  let query = unscreenedArticles(db, values.screened, values.now);
  if (values.authorKey !== undefined) {
    query = query.where('articles.author_id', '=', userIdByName(db, values.authorKey, values.screened));
  }
  if (values.tag !== undefined) query = query.where('articles.id', 'in', articleIdsTagged(db, values.tag));
  if (values.favoritedKey !== undefined) {
    query = query.where('articles.id', 'in', articleIdsFavoritedBy(db, values.favoritedKey, values.screened));
  }
  if (values.followedBy !== undefined) {
    const followed = db.selectFrom('follows').select('follows.followed_id').where('follows.follower_id', '=', values.followedBy);
    query = query.where('articles.author_id', 'in', followed);
  }
  return query;
}

/**
 * How many of the links of `link` that `owned` picks out (a tag's, a user's favorites) a kept count counts although
 * the viewer screens their article's author: driven from the screened authors' articles, so it costs what they wrote
 * at most, whatever the tag or the user holds.
 */
const screenedLinksCounted = (db: Executor, link: 'article_tags' | 'favorites', owned: RawBuilder<SqlBool>, screened: ScreenedList) =>
  sql<number>`(select count(*) from ${sql.table(link)} link
    where ${owned} and link.article_counted = 1 and link.article_id in ${screenedArticleIds(db, screened)})`;

/**
 * `articlesCount` without counting, as a one-row query: a single filter (or none) reads the count the triggers keep
 * beside its rows (all articles: the sum of the striped total); only a combination of filters counts the matches.
 * The kept counts count published articles (migration 0013): a scheduled article joins them when the scheduler
 * records its publication, at most a poll interval after the lists show it.
 *
 * A viewer who screens authors (profiles/blocks.ts) gets the kept count less what those authors add to it, read by
 * the same rule the count keeps (their own kept articles_count, or the links it counts), rather than a count of the
 * matches: that costs what the screened authors wrote, where counting would cost every match of a large tag or of
 * all articles. A filter on a screened user finds no user, so counts nothing.
 */
function totalMatching(db: Executor, values: ListValues) {
  const { tag, authorKey, favoritedKey, followedBy, screened } = values;
  const active = [tag, authorKey, favoritedKey, followedBy].filter((value) => value !== undefined);
  if (active.length > 1) return filteredArticles(db, values).select((eb) => eb.fn.countAll<number>().as('count'));
  if (active.length === 0) {
    const total = db.selectFrom('article_totals');
    if (screened === undefined) return total.select((eb) => eb.fn.sum<number>('articles').as('count'));
    const screenedArticles = db
      .selectFrom('users')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('users.articles_count'), eb.lit(0)).as('articles'))
      .where('users.id', 'in', screenedAmong(db, screened));
    return total.select(sql<number>`sum(article_totals.articles) - ${screenedArticles}`.as('count'));
  }
  if (tag !== undefined) {
    const tagRow = db.selectFrom('tags').where('name', '=', tag);
    if (screened === undefined) return tagRow.select('article_count as count');
    const screenedLinks = screenedLinksCounted(db, 'article_tags', sql`link.tag_id = tags.id`, screened);
    return tagRow.select(sql<number>`tags.article_count - ${screenedLinks}`.as('count'));
  }
  if (authorKey !== undefined) return userByName(db, authorKey, screened).select('articles_count as count');
  if (favoritedKey !== undefined) {
    const user = userByName(db, favoritedKey, screened);
    if (screened === undefined) return user.select('favorites_count as count');
    const screenedLinks = screenedLinksCounted(db, 'favorites', sql`link.user_id = users.id`, screened);
    return user.select(sql<number>`users.favorites_count - ${screenedLinks}`.as('count'));
  }
  return db
    .selectFrom('follows')
    .innerJoin('users', 'users.id', 'follows.followed_id')
    .select((eb) => eb.fn.sum<number>('users.articles_count').as('count'))
    .where('follows.follower_id', '=', followedBy!)
    .$if(screened !== undefined, (query) => query.where('follows.followed_id', 'not in', screenedAmong(db, screened!)));
}

/** The articles of a page as this viewer sees them, in the order of `ids`. */
async function articlesInOrder(db: Executor, ids: number[], viewerId: number | null, search: Search | undefined, now: number) {
  if (ids.length === 0) return [];
  const rows = await withArticleView(db.selectFrom('articles').where('articles.id', 'in', ids), viewerId)
    .select('articles.id')
    .$if(search !== undefined, (query) => query.select(sql<string>`substr(articles.body, 1, ${SNIPPET_SCAN})`.as('body_start')))
    .execute();
  const position = new Map(ids.map((id, index) => [id, index]));
  return rows
    .sort((a, b) => position.get(a.id)! - position.get(b.id)!)
    .map((row) => {
      const bodyStart = (row as { body_start?: string }).body_start;
      return bodyStart === undefined ? toSummary(row, now) : { ...toSummary(row, now), snippet: snippetHtml(bodyStart, search!) };
    });
}

/** Where searches run, and how one waits for its turn there. */
export interface Searcher {
  db: Executor;
  inTurn(search: () => Promise<ListAnswer>): Promise<ListAnswer>;
}

export type ListAnswer = {
  articles: ReturnType<typeof toSummary>[];
  articlesCount: number;
  nextCursor: string | null;
  /** A search that stopped looking for older matches (newestPostgresMatches): there may be more than it ranked. */
  partial?: true;
};

/**
 * A page of `query`'s articles ordered newest first by `key`, as this viewer sees them, with the total as a subquery
 * the database runs once: one statement.
 */
function pageRows(
  query: SelectQueryBuilder<Database, 'articles', object>,
  key: 'articles.listed_at' | 'articles.updated_at',
  total: SelectQueryBuilder<Database, never, { count: number }>,
  limit: number,
  viewerId: number | null,
) {
  return withArticleView(query, viewerId)
    .select(['articles.id', sql.ref<number>(key).as('page_key'), total.as('articles_count')])
    .orderBy(key, 'desc')
    .orderBy('articles.id', 'desc')
    .limit(sql.lit(limit + 1));
}

type PageRow = Awaited<ReturnType<ReturnType<typeof pageRows>['execute']>>[number];

/** The public lists' and the feed's page statement, built once per shape: most requests are one of these. */
const listPage = preparedQuery((db: Executor, values: PageValues, limit: number) =>
  pageRows(
    db.selectFrom('articles').where('articles.id', 'in', pageIds(db, values, limit)),
    'articles.listed_at',
    totalMatching(db, values),
    limit,
    values.viewerId ?? null,
  ),
);

/**
 * The `{ articles, articlesCount, nextCursor }` answer as this viewer sees it, newest first, in one statement: the
 * page, and the total as a subquery the database runs once. Only a page past the end, which has no row to carry the
 * total, asks again. A search, once its text is read (a 422 waits for nothing), runs all its statements on `searcher`
 * (DatabaseHandle.searcher) in the turn it waits for.
 */
export async function listArticles(
  db: Executor,
  filters: ArticleFilters,
  page: Page,
  viewerId: number | null,
  searcher: Searcher = { db, inTurn: (search) => search() },
): Promise<ListAnswer> {
  if (filters.q?.trim()) {
    const search = parseSearch(filters.q);
    return searcher.inTurn(() => searchArticles(searcher.db, filters, search, page, viewerId));
  }
  const cursor = page.cursor === undefined ? undefined : decodeListCursor(page.cursor, 'time');
  const now = Date.now();
  const values: PageValues = {
    ...listValues(db, filters, now),
    offset: page.offset,
    cursorAt: cursor?.at,
    cursorId: cursor?.id,
    perAuthor: filters.followedBy === undefined ? undefined : page.offset + page.limit + 1,
    viewerId: viewerId ?? undefined,
  };
  const rows = await listPage.execute(db, values, page.limit);
  return pageAnswer(rows, page, now, () => totalMatching(db, values).executeTakeFirst());
}

/** The answer for a page's rows, and the total asked again only when the page, past the end, has no row to carry it. */
async function pageAnswer(
  rows: PageRow[],
  page: Page,
  now: number,
  countAgain: () => Promise<{ count: number } | undefined>,
): Promise<ListAnswer> {
  const articlesCount = rows.length > 0 ? rows[0]!.articles_count : (await countAgain())?.count;
  const shown = rows.slice(0, page.limit);
  const last = shown.at(-1);
  return {
    articles: shown.map((row) => toSummary(row, now)),
    articlesCount: Number(articlesCount ?? 0),
    nextCursor: rows.length > page.limit ? encodeListCursor({ kind: 'time', at: Number(last!.page_key), id: last!.id }) : null,
  };
}

/** What `?status=` asks for, as readers see the state now (a scheduled article whose time has come is published). */
function inStatus(eb: ExpressionBuilder<Database, 'articles'>, status: ArticleStatus, now: number) {
  if (status === 'published') {
    return eb.or([
      eb('articles.status', '=', 'published'),
      eb.and([eb('articles.status', '=', 'scheduled'), eb('articles.publish_at', '<=', now)]),
    ]);
  }
  if (status === 'scheduled') return eb.and([eb('articles.status', '=', 'scheduled'), eb('articles.publish_at', '>', now)]);
  return eb('articles.status', '=', status);
}

/**
 * The author's own articles in every state (or one), newest change first, off the (author_id, updated_at, id) index:
 * a page walks the author's articles from the cursor, and the total counts them, so both cost what the author has
 * written at most.
 */
export async function listOwnArticles(db: Executor, authorId: number, status: ArticleStatus | undefined, page: Page): Promise<ListAnswer> {
  const cursor = page.cursor === undefined ? undefined : decodeListCursor(page.cursor, 'time');
  const now = Date.now();
  const own = db
    .selectFrom('articles')
    .where('articles.author_id', '=', authorId)
    .$if(status !== undefined, (query) => query.where((eb) => inStatus(eb, status!, now)));
  const total = own.select((eb) => eb.fn.countAll<number>().as('count'));
  const pageQuery = own
    .$if(cursor !== undefined, (query) => query.where(olderThan('articles.updated_at', 'articles.id', cursor!.at, cursor!.id)))
    .offset(page.offset);
  const rows = await pageRows(pageQuery, 'articles.updated_at', total, page.limit, authorId).execute();
  return pageAnswer(rows, page, now, () => total.executeTakeFirst());
}

/**
 * The most recent articles matching a search and every filter, at most SEARCH_CANDIDATES, each with its relevance
 * (higher is better), as a subquery of (id, relevance). Only these are ranked, so a word found in every article costs
 * SEARCH_CANDIDATES rows, not a million. `partial` when PostgreSQL stopped looking before it had them all.
 */
async function searchCandidates(
  db: Executor,
  values: ListValues,
  search: Search,
  horizon: number | undefined,
): Promise<{ candidates: RawBuilder<unknown>; partial: boolean }> {
  const postgres = dialectOf(db) === 'postgres';
  const id = sql.ref(postgres ? 'article_id' : 'rowid');
  // The index holds every article; only the public ones (not by an author the viewer screens) are candidates, each
  // checked by its primary key.
  const indexed = sql.ref(`article_search.${postgres ? 'article_id' : 'rowid'}`);
  // Kysely writes the subquery in parentheses of its own: SQLite reads `exists ((select ...))` as a syntax error.
  const isPublic = sql`and exists ${unscreenedArticles(db, values.screened, values.now)
    .select('articles.id')
    .where(sql<SqlBool>`articles.id = ${indexed}`)}`;
  const { authorKey, tag, favoritedKey, screened } = values;
  const narrowing = [
    authorKey !== undefined &&
      db
        .selectFrom('articles')
        .select('articles.id')
        .where('articles.author_id', '=', userIdByName(db, authorKey, screened)),
    tag !== undefined && articleIdsTagged(db, tag),
    favoritedKey !== undefined && articleIdsFavoritedBy(db, favoritedKey, screened),
  ].flatMap((ids) => (ids ? [sql`and ${id} in (${ids})`] : []));
  narrowing.push(isPublic);
  if (postgres) {
    const { ids, partial } = await newestPostgresMatches(db, search, sql.join(narrowing, sql` `), horizon);
    // Normalization 1 divides by the log of the length, as BM25 discounts long articles.
    const candidates = sql`select article_id as id, ts_rank_cd(document, ${tsQuery(search)}, 1)::float8 as relevance
      from article_search where article_id = any(${ids})`;
    return { candidates, partial };
  }
  if (horizon !== undefined) narrowing.push(sql`and rowid <= ${horizon}`);
  // FTS5 yields the matches newest first and stops at the limit. bm25() is negative, lower for better matches; its
  // weights follow the index's columns (title, description, body, tags). Without it the candidates rank alike,
  // newest first.
  const relevance = (await fewMatchesEach(db, search, horizon)) ? sql`-bm25(article_search, 10.0, 3.0, 1.0, 5.0)` : sql`0`;
  const candidates = sql`select rowid as id, ${relevance} as relevance
    from article_search where article_search match ${fts5Query(search)} ${sql.join(narrowing, sql` `)}
    order by rowid desc limit ${SEARCH_CANDIDATES}`;
  return { candidates, partial: false };
}

/**
 * PostgreSQL's GIN index finds matches in no useful order, so "the newest matches" is asked in two steps. First among
 * the newest RECENT_WINDOW articles, walked newest first or through the index, as the planner likes: bounded either
 * way, and enough for any word in more than a few percent of the articles. Only if that leaves places does the
 * index look further back, which costs in proportion to the older matches: for words rarer than that, few. A phrase
 * of common words that is itself rare makes PostgreSQL check every article holding all of its words; a statement
 * timeout bounds that, and the search then ranks what the first step found, `partial`: older matches may be missing.
 */
async function newestPostgresMatches(
  db: Executor,
  search: Search,
  conditions: RawBuilder<unknown>,
  horizon: number | undefined,
): Promise<{ ids: number[]; partial: boolean }> {
  const newest =
    horizon ?? Number((await sql<{ id: number | null }>`select max(article_id) as id from article_search`.execute(db)).rows[0]?.id ?? 0);
  const floor = newest - RECENT_WINDOW;
  const matching = sql`document @@ ${tsQuery(search)} ${conditions}`;
  const { rows: recent } = await sql<{ id: number }>`select article_id as id from article_search
    where ${matching} and article_id > ${floor} and article_id <= ${newest}
    order by article_id desc limit ${SEARCH_CANDIDATES}`.execute(db);
  const ids = recent.map((row) => row.id);
  if (ids.length === SEARCH_CANDIDATES || floor <= 0) return { ids, partial: false };
  try {
    const older = await db.transaction().execute(async (trx) => {
      await sql`select set_config('statement_timeout', ${String(OLDER_MATCHES_TIMEOUT_MS)}, true)`.execute(trx);
      // `+ 0`: not the primary key's order, so the plan goes through the GIN index instead of walking every article.
      return sql<{ id: number }>`select article_id as id from article_search where ${matching} and article_id <= ${floor}
        order by article_id + 0 desc limit ${SEARCH_CANDIDATES - ids.length}`.execute(trx);
    });
    return { ids: [...ids, ...older.rows.map((row) => row.id)], partial: false };
  } catch (error) {
    if (isQueryCanceled(error)) return { ids, partial: true };
    throw error;
  }
}

interface RankedRow {
  id: number;
  matches: number;
  horizon: number;
}

/**
 * A page of search results, best first: two statements whatever the page size, one ranking the candidates (with
 * their number and the newest id as window values), one reading the page's articles with their snippets.
 */
async function searchArticles(
  db: Executor,
  filters: ArticleFilters,
  typed: Search,
  page: Page,
  viewerId: number | null,
): Promise<ListAnswer> {
  const search = dialectOf(db) === 'postgres' ? await asPostgresSearch(db, typed) : typed;
  const cursor: RelevanceCursor | undefined = page.cursor === undefined ? undefined : decodeListCursor(page.cursor, 'relevance');
  const now = Date.now();
  const { candidates, partial } = await searchCandidates(db, listValues(db, filters, now), search, cursor?.horizon);
  const position = cursor?.position ?? page.offset;
  const { rows } = await sql<RankedRow>`
    select id, matches, horizon from (
      select id, relevance, count(*) over () as matches, max(id) over () as horizon from (${candidates}) candidates
    ) ranked
    order by relevance desc, id desc limit ${page.limit + 1} offset ${position}`.execute(db);
  const shown = rows.slice(0, page.limit);
  const matches = rows.length > 0 ? rows[0]!.matches : await countCandidates(db, candidates);
  const horizon = cursor?.horizon ?? Number(rows[0]?.horizon);
  return {
    articles: await articlesInOrder(
      db,
      shown.map((row) => Number(row.id)),
      viewerId,
      search,
      now,
    ),
    articlesCount: Number(matches),
    nextCursor: rows.length > page.limit ? encodeListCursor({ kind: 'relevance', position: position + page.limit, horizon }) : null,
    ...(partial && { partial }),
  };
}

/**
 * Whether every clause of the search, alone, is in at most BM25_MATCHES_MAX articles (up to the horizon, so that
 * the pages of one search rank alike): only then is bm25() cheap enough. One statement, each count stopping at the
 * bound.
 */
async function fewMatchesEach(db: Executor, search: Search, horizon: number | undefined): Promise<boolean> {
  const upTo = horizon === undefined ? sql`` : sql`and rowid <= ${horizon}`;
  const counts = fts5Phrases(search).map(
    (phrase) => sql`select count(*) as matches from (
      select 1 from article_search where article_search match ${phrase} ${upTo} limit ${BM25_MATCHES_MAX + 1})`,
  );
  const { rows } = await sql<{ most: number }>`select max(matches) as most from (${sql.join(counts, sql` union all `)})`.execute(db);
  return Number(rows[0]!.most) <= BM25_MATCHES_MAX;
}

async function countCandidates(db: Executor, candidates: RawBuilder<unknown>) {
  const { rows } = await sql<{ count: number }>`select count(*) as count from (${candidates}) candidates`.execute(db);
  return rows[0]!.count;
}
