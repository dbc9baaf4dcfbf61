import { type ExpressionBuilder, type SqlBool, sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import type { ArticleStatus, Database } from '../../db/schema.js';
import { type Screening, separatedFrom } from '../profiles/blocks.js';

/**
 * Who may see an article, in one place. `listed_at` (computed by the database, migration 0013) is when the article
 * is or becomes public and null while it is a draft, unpublished or withheld; an article is public once that time
 * has passed, so a scheduled one appears at its publishAt whether or not the scheduler has run. A non-public article
 * exists for its author alone: everyone else gets 404 on it and never meets it in a list.
 *
 * Every public read of articles starts from `publicArticles` (or, through a tag's links or a user's favorites, asks
 * `publicLinkAt`), and every read of one article by its slug goes through `visibleTo`.
 */
export const publicAt = (eb: ExpressionBuilder<Database, 'articles'>, now: number) => eb('articles.listed_at', '<=', instant(now));

/**
 * `now` as the bound of a time range in SQL. Cast, because better-sqlite3 binds a JavaScript number as a double, and a
 * list page whose index range is bounded by a double cost SQLite 2-3 times what the same page bounded by an integer
 * costs (measured on the list statement: 151 µs against 58).
 */
export const instant = (now: number) => sql<number>`cast(${now} as bigint)`;

/**
 * The `listed_at` an article in this state carries (the database's check constraint holds writers to it): its
 * publication while published, its publishAt while scheduled, null while a draft, unpublished or withheld.
 */
export function listedAt(article: { status: ArticleStatus; publish_at: number | null; published_at: number | null; withheld: number }) {
  if (article.withheld !== 0) return null;
  if (article.status === 'published') return article.published_at;
  return article.status === 'scheduled' ? article.publish_at : null;
}

/**
 * Why an article is withheld, as bits of articles.withheld: its author's account is leaving (users/leaving.ts), a
 * moderator hid it (modules/moderation). Either keeps it from everyone but its author; each is set and cleared alone.
 */
export const WITHHELD = { leaving: 1, hidden: 2 } as const;

/**
 * The withheld bits and the listed_at that go with them, in SQL, for a statement that sets or clears one reason on
 * many articles at once (an account leaving and back, a hide).
 */
export function withheldFor(reason: keyof typeof WITHHELD, on: boolean) {
  const bit = WITHHELD[reason];
  const withheld = on ? sql<number>`articles.withheld | ${sql.lit(bit)}` : sql<number>`articles.withheld & ${sql.lit(~bit)}`;
  return (eb: ExpressionBuilder<Database, 'articles'>) => ({
    withheld,
    listed_at: eb
      .case()
      .when(withheld, '<>', 0)
      .then(null)
      .when('articles.status', '=', 'published')
      .then(eb.ref('articles.published_at'))
      .when('articles.status', '=', 'scheduled')
      .then(eb.ref('articles.publish_at'))
      .else(null)
      .end(),
  });
}

/** The articles anyone may see now: where every public list, feed and count starts. */
export const publicArticles = (db: Executor, now = Date.now()) => db.selectFrom('articles').where('articles.listed_at', '<=', instant(now));

/**
 * The same rule read off a link table aliased `link` (a tag's articles, a user's favorites): each link carries its
 * article's listed_at (migration 0017), so a list through a tag or a user's favorites walks one index.
 */
export const publicLinkAt = (now: number) => sql<SqlBool>`${sql.ref('link.article_listed_at')} <= ${instant(now)}`;

/**
 * Public now, or written by the viewer; every article for a moderator (modules/moderation/roles.ts readsAsModerator),
 * who must see what they hide and judge what is reported. Lists stay public-only for everyone.
 */
export function visibleTo(eb: ExpressionBuilder<Database, 'articles'>, viewerId: number | null, now = Date.now(), moderator = false) {
  if (moderator) return eb.lit(true).$castTo<SqlBool>() as ReturnType<typeof publicAt> & SqlBool;
  if (viewerId === null) return publicAt(eb, now);
  return eb.or([publicAt(eb, now), eb('articles.author_id', '=', viewerId)]) as ReturnType<typeof publicAt> & SqlBool;
}

/** Who reads an article by its link, as a prepared query (db/prepared.ts) binds it. */
export interface ReaderValues {
  now: number;
  viewerId?: number;
  /** The viewer whose blocks, either way, hide the article's author (a screening viewer's reads). */
  separatedFrom?: number;
  moderator?: true;
}

export const readerValues = (viewerId: number | null, screener: Screening | null, moderator: boolean): ReaderValues => ({
  now: Date.now(),
  viewerId: viewerId ?? undefined,
  separatedFrom: screener?.viewerId,
  moderator: moderator || undefined,
});

/** The articles this reader reaches by their link: visibleTo, less the authors a block separates from them. */
export const reachableArticles = (db: Executor, reader: ReaderValues) =>
  db
    .selectFrom('articles')
    .where((eb) => visibleTo(eb, reader.viewerId ?? null, reader.now, reader.moderator !== undefined))
    .$if(reader.separatedFrom !== undefined, (query) =>
      query.where('articles.author_id', 'not in', separatedFrom(db, reader.separatedFrom!)),
    );
