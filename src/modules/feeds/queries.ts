import { sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import { usernameKey } from '../../identity.js';
import { withArticleView } from '../articles/view.js';
import { publicArticles, publicLinkAt } from '../articles/visibility.js';
import { presentTo } from '../profiles/queries.js';

/** Articles per feed: each carries its whole rendered body, so this bounds an answer at about FEED_SIZE × BODY_MAX. */
export const FEED_SIZE = 20;

/** Whose articles a feed shows. */
export type FeedScope = { kind: 'site' } | { kind: 'author'; authorId: number } | { kind: 'tag'; tagId: number };

export function findAuthor(db: Executor, username: string) {
  return db
    .selectFrom('users')
    .select(['id', 'username', 'profile_updated_at'])
    .where('username_key', '=', usernameKey(username))
    .where((eb) => presentTo(eb, null))
    .executeTakeFirst();
}

/**
 * A tag some public article carries now: one that only drafts, scheduled or withheld articles carry is unknown to the
 * feed, as to GET /api/tags, so its 404 tells a stranger nothing of them. One probe of the tag's link index.
 */
export function findTag(db: Executor, name: string, now: number) {
  return db
    .selectFrom('tags')
    .select(['id', 'name'])
    .where('name', '=', name)
    .where((eb) =>
      eb.exists(
        eb.selectFrom('article_tags as link').select(sql.lit(1).as('one')).whereRef('link.tag_id', '=', 'tags.id').where(publicLinkAt(now)),
      ),
    )
    .executeTakeFirst();
}

/**
 * The newest FEED_SIZE public ids of the scope, off the index that holds them in publication order (as the article
 * list reads its pages): articles (listed_at, id), articles (author_id, listed_at, id), article_tags (tag_id,
 * article_listed_at, article_id). A feed reads FEED_SIZE index entries whatever the number of articles.
 */
function newestIds(db: Executor, scope: FeedScope, now: number) {
  if (scope.kind === 'tag') {
    return db
      .selectFrom('article_tags as link')
      .where('link.tag_id', '=', scope.tagId)
      .where(publicLinkAt(now))
      .select('link.article_id as id')
      .orderBy('link.article_listed_at', 'desc')
      .orderBy('link.article_id', 'desc')
      .limit(sql.lit(FEED_SIZE));
  }
  const articles = publicArticles(db, now).select('articles.id');
  return (scope.kind === 'author' ? articles.where('articles.author_id', '=', scope.authorId) : articles)
    .orderBy('articles.listed_at', 'desc')
    .orderBy('articles.id', 'desc')
    .limit(sql.lit(FEED_SIZE));
}

/** The scope's newest articles with their bodies, authors and tags, newest published first: one statement. */
export function feedArticles(db: Executor, scope: FeedScope) {
  return withArticleView(db.selectFrom('articles').where('articles.id', 'in', newestIds(db, scope, Date.now())), null)
    .select(['articles.id', 'articles.body', 'users.profile_updated_at as author_updated_at'])
    .orderBy('articles.listed_at', 'desc')
    .orderBy('articles.id', 'desc')
    .execute();
}

/**
 * When the newest event was recorded: every write that can change a feed (an article written, edited, deleted,
 * published or withheld) appends one in its own transaction, so nothing in any feed changed after it. A walk back
 * the (created_at, id) index, past the newest accounts' own changes (see below).
 */
export async function lastRecordedWrite(db: Executor): Promise<number | null> {
  const newest = await db
    .selectFrom('events')
    .select('created_at')
    // An account's changes show in a feed only through its articles' rows (profile_updated_at, which the feed's shown
    // time covers): an email or a password change must not move every feed's date for strangers to see.
    .where('type', '<>', 'user.updated')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return newest?.created_at ?? null;
}
