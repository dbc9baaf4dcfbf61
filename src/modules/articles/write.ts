import { uniqueViolation } from '../../db/constraints.js';
import { dialectOf, type Executor } from '../../db/index.js';
import { preparedQuery } from '../../db/prepared.js';
import { inTransaction, type Precondition } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import { toIso } from '../../schemas.js';
import { appendEvent, changeWithEvent, mentionOf } from '../events/outbox.js';
import { appendAudit } from '../moderation/records.js';
import { noBlockBetween, type Screening } from '../profiles/blocks.js';
import { toProfile } from '../profiles/queries.js';
import { keepEditedRevision, keepRevision } from '../revisions/queries.js';
import type { Account } from '../users/queries.js';
import { currentState, initialState, isListed, nextState, type StoredState } from './lifecycle.js';
import type { ArticleChanges, NewArticle } from './schemas.js';
import { slugify, suffixed } from './slug.js';
import { byCodePoint, normalizeTags } from './tags.js';
import { getArticleAnswer } from './view.js';
import { listedAt, type ReaderValues, reachableArticles, readerValues, WITHHELD, withheldFor } from './visibility.js';

const SLUG_ATTEMPTS = 5;

/** Who does a write, with what the event shows of them. */
export type Actor = Pick<Account, 'id' | 'username' | 'bio' | 'image'>;

/**
 * The few columns that decide existence and ownership, before any write: undefined when no article has that slug or
 * the viewer may not see it (visibility.ts), so that everything about an article that is not public is the same 404
 * for everyone but its author. With `screener` (profiles/blocks.ts), also when a block separates the viewer from its
 * author: for reads; a write across a block is refused by the write itself (403).
 */
export function findArticleRef(db: Executor, slug: string, viewerId: number | null, screener: Screening | null = null, moderator = false) {
  return articleRef.executeTakeFirst(db, { slug, ...readerValues(viewerId, screener, moderator) });
}

/** Before every comment list, favorite and comment: built once per shape (db/prepared.ts). */
const articleRef = preparedQuery((db: Executor, values: ReaderValues & { slug: string }) =>
  reachableArticles(db, values)
    .select(['id', 'slug', 'author_id', 'title', 'status', 'publish_at', 'published_at', 'withheld', 'created_at', 'updated_at'])
    .where('slug', '=', values.slug),
);

export type ArticleRef = NonNullable<Awaited<ReturnType<typeof findArticleRef>>>;

/** Whether anyone but the author may see the article now. */
export const isPublicNow = (article: Pick<ArticleRef, 'withheld'> & StoredState, now: number) =>
  article.withheld === 0 && isListed(currentState(article, now));

/** The article's ref, or the contract's 404 when no article has that slug that this viewer may see. */
export async function existingArticleRef(db: Executor, slug: string, viewerId: number | null, moderator = false) {
  const article = await findArticleRef(db, slug, viewerId, null, moderator);
  if (article === undefined) throw notFound('article');
  return article;
}

/**
 * Creates the tags in `names` that do not exist yet and returns the ids of all of them. On PostgreSQL it also
 * locks every tag row the write is going to count (these and `alsoLocked`) in id order, before the triggers on
 * article_tags move their counts in whatever order the links come: concurrent edits of overlapping tags would
 * otherwise deadlock. Lock order everywhere: the article, then its tags, then the users whose counts move (in id
 * order where there are several) and the article total. SQLite runs one writing transaction at a time and needs
 * none of it.
 */
async function lockTags(trx: Executor, names: string[], alsoLocked: number[] = []): Promise<number[]> {
  let ids: number[] = [];
  if (names.length > 0) {
    await trx
      .insertInto('tags')
      .values([...names].sort(byCodePoint).map((name) => ({ name })))
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    ids = (await trx.selectFrom('tags').select('id').where('name', 'in', names).execute()).map((tag) => tag.id);
  }
  const touched = [...ids, ...alsoLocked];
  if (touched.length > 0 && dialectOf(trx) === 'postgres') {
    await trx.selectFrom('tags').select('id').where('id', 'in', touched).orderBy('id').forUpdate().execute();
  }
  return ids;
}

/** What a link row carries of its article (migration 0017): its listed_at, and whether the counts count it. */
const linkListing = (article: Pick<ArticleRef, 'withheld'> & StoredState) => ({
  article_listed_at: listedAt(article),
  article_counted: article.withheld === 0 && isListed(article) ? 1 : 0,
});

function linkTags(trx: Executor, article: Pick<ArticleRef, 'id' | 'withheld'> & StoredState, tagIds: number[]) {
  if (tagIds.length === 0) return Promise.resolve();
  return trx
    .insertInto('article_tags')
    .values(tagIds.map((tag_id) => ({ article_id: article.id, tag_id, ...linkListing(article) })))
    .execute();
}

/**
 * Runs a write that sets a slug derived from `title`; when the slug is taken (the unique key says so,
 * also under concurrency) the whole transaction runs again with a suffixed slug.
 */
async function withFreeSlug<T>(db: Executor, title: string, write: (trx: Executor, slug: string) => Promise<T>): Promise<T> {
  const base = slugify(title);
  for (let attempt = 1; ; attempt++) {
    const slug = attempt === 1 ? base : suffixed(base);
    try {
      return await inTransaction(db, (trx) => write(trx, slug));
    } catch (error) {
      if (attempt >= SLUG_ATTEMPTS || uniqueViolation(error) !== 'slug') throw error;
    }
  }
}

type ArticleAnswer = NonNullable<Awaited<ReturnType<typeof getArticleAnswer>>>;

/** The article as its author sees it now, read inside the write's transaction. */
async function authorsView(trx: Executor, id: number, authorId: number): Promise<ArticleAnswer> {
  const answer = await getArticleAnswer(trx, { id }, authorId);
  if (answer === undefined) throw new Error(`article ${id} vanished inside its own transaction`);
  return answer;
}

/** What an event shows of the article: the author's view with `favorited` as anyone else sees it. */
const eventArticle = (answer: ArticleAnswer) => ({ article: { ...answer.article, favorited: false } });

/**
 * Creates the article and answers it as its author sees it, built from what was written instead of read back: a new
 * article has no favorites, and its author follows nobody as themselves. The event carries the same article, and
 * stays off the public stream unless the article is public at once.
 */
export function createArticle(db: Executor, author: Actor, article: NewArticle, now: number): Promise<ArticleAnswer> {
  const tagList = normalizeTags(article.tagList ?? []);
  const state = initialState(article, now);
  return withFreeSlug(db, article.title, async (trx, slug) => {
    // The new article row is the one lock no one else can be waiting for, so its tags go first here.
    const tagIds = await lockTags(trx, tagList);
    const { id } = await trx
      .insertInto('articles')
      .values({
        slug,
        title: article.title,
        description: article.description,
        body: article.body,
        author_id: author.id,
        // The final list, so that linking the tags below leaves the row alone (migration 0012).
        tag_list: JSON.stringify(tagList),
        ...state,
        listed_at: listedAt({ ...state, withheld: 0 }),
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await linkTags(trx, { id, withheld: 0, ...state }, tagIds);
    await keepRevision(trx, id, { title: article.title, description: article.description, body: article.body, tagList }, now);
    const answer = {
      article: {
        slug,
        title: article.title,
        description: article.description,
        tagList,
        createdAt: toIso(now),
        updatedAt: toIso(now),
        favorited: false,
        favoritesCount: 0,
        author: toProfile({ ...author, following: false }),
        status: state.status,
        publishAt: state.publish_at === null ? null : toIso(state.publish_at),
        publishedAt: state.published_at === null ? null : toIso(state.published_at),
        body: article.body,
      },
    };
    await appendEvent(
      trx,
      { type: 'article.created', actorId: author.id, ownerId: author.id, articleId: id, data: answer, public: isListed(state) },
      now,
    );
    return answer;
  });
}

/**
 * On PostgreSQL, locks the article row for the rest of the transaction, so that a precondition judged on what is
 * read next still holds at commit (a favorite locks the row too, so its count cannot move meanwhile); SQLite's
 * write transaction already keeps every other writer out.
 */
async function lockArticle(trx: Executor, id: number): Promise<void> {
  if (dialectOf(trx) === 'postgres') await trx.selectFrom('articles').select('id').where('id', '=', id).forUpdate().execute();
}

/**
 * On PostgreSQL, locks what a change of the article's listing or its deletion moves through the triggers, in the
 * order every other write takes them: its tags in id order, then the users whose counts move (the author and
 * everyone who favorited it) in id order. Two deletes whose authors favorited each other's articles would otherwise
 * lock those two users in opposite orders. The article row must be locked already. Without an `id`, the same for
 * every article of the author.
 */
async function lockCounted(trx: Executor, article: Pick<ArticleRef, 'author_id'> & { id?: number }): Promise<void> {
  if (dialectOf(trx) !== 'postgres') return;
  const ids =
    article.id === undefined
      ? trx.selectFrom('articles').select('articles.id').where('articles.author_id', '=', article.author_id)
      : [article.id];
  const links = await trx.selectFrom('article_tags').select('tag_id').distinct().where('article_id', 'in', ids).execute();
  await lockTags(
    trx,
    [],
    links.map((link) => link.tag_id),
  );
  await trx
    .selectFrom('users')
    .select('id')
    .where((eb) =>
      eb.or([
        eb('id', '=', article.author_id),
        eb('id', 'in', eb.selectFrom('favorites').select('user_id').where('article_id', 'in', ids)),
      ]),
    )
    .orderBy('id')
    .forNoKeyUpdate()
    .execute();
}

/**
 * On PostgreSQL, locks every article of the author, then what they count (lockCounted: their tags, then the author
 * and everyone who favorited one), in the order every other write takes them: what `setWithheld` needs, and the
 * author's own row with it.
 */
export async function lockAuthorsArticles(trx: Executor, authorId: number): Promise<void> {
  if (dialectOf(trx) !== 'postgres') return;
  await trx.selectFrom('articles').select('id').where('author_id', '=', authorId).orderBy('id').forUpdate().execute();
  await lockCounted(trx, { author_id: authorId });
}

/**
 * Withholds every article of the author from everyone else while the author's account is leaving, or gives them
 * back (users/leaving.ts): one UPDATE, whose triggers move every count, link key and tag count (migration 0013), so
 * that giving them back restores each exactly. lockAuthorsArticles first.
 */
export async function setWithheld(trx: Executor, authorId: number, withheld: boolean): Promise<void> {
  await trx.updateTable('articles').set(withheldFor('leaving', withheld)).where('author_id', '=', authorId).execute();
}

/**
 * The lifecycle and content columns as stored now, inside the write's transaction (what the edit is judged on, and
 * whether it changed the content); undefined when the article is gone. On PostgreSQL the row is locked for the rest
 * of the transaction (as lockArticle does), so that a transition or a precondition judged on it still holds at commit.
 */
function storedState(trx: Executor, id: number) {
  return trx
    .selectFrom('articles')
    .select(['status', 'publish_at', 'published_at', 'withheld', 'title', 'description', 'body', 'tag_list'])
    .where('id', '=', id)
    .$if(dialectOf(trx) === 'postgres', (query) => query.forUpdate())
    .executeTakeFirst();
}

/**
 * Records the publication of a scheduled article whose time has come, once: the row is read locked and only while it
 * is still `scheduled`, so of every process (and every request editing it) that tries, exactly one records it and
 * appends its `article.published` event, which says how late the recording ran. Readers saw the article from its
 * publishAt on already (visibility.ts). Returns whether this call recorded it.
 */
export async function recordDuePublication(trx: Executor, id: number, now: number): Promise<boolean> {
  const due = await trx
    .selectFrom('articles')
    .select(['id', 'author_id', 'publish_at', 'published_at', 'withheld'])
    .where('id', '=', id)
    .where('status', '=', 'scheduled')
    .where('publish_at', '<=', now)
    .$if(dialectOf(trx) === 'postgres', (query) => query.forUpdate())
    .executeTakeFirst();
  if (due === undefined) return false;
  const publishAt = due.publish_at!;
  const published = { status: 'published' as const, publish_at: null, published_at: due.published_at ?? publishAt };
  await lockCounted(trx, due);
  await trx
    .updateTable('articles')
    .set({ ...published, listed_at: listedAt({ ...published, withheld: due.withheld }) })
    .where('id', '=', id)
    .execute();
  // As its author sees it: an article withheld (its author is leaving) is not public, and anonymous readers see nothing.
  const answer = eventArticle(await authorsView(trx, id, due.author_id));
  await appendEvent(
    trx,
    {
      type: 'article.published',
      actorId: due.author_id,
      ownerId: due.author_id,
      articleId: id,
      data: { ...answer, scheduledFor: toIso(publishAt), lateByMs: Math.max(0, now - publishAt) },
      // Its author is leaving: published on time, for the author alone until they cancel.
      public: due.withheld === 0,
    },
    now,
  );
  await appendAudit(trx, { actorId: null, action: 'article.published', targetType: 'article', targetId: id }, now);
  return true;
}

/**
 * Hides the article from everyone but its author (a `reason`), or shows it again (null), through its withheld bit, so
 * that every list and count drops or regains it by the triggers of migration 0013 (modules/moderation). Locks as
 * any change of the article's listing does. Whether it was public before and after (what its events say), or
 * undefined when it was already in that state or is gone.
 */
export async function setArticleHidden(trx: Executor, article: Pick<ArticleRef, 'id' | 'author_id'>, reason: string | null, now: number) {
  const before = await storedState(trx, article.id);
  if (before === undefined || ((before.withheld & WITHHELD.hidden) !== 0) === (reason !== null)) return undefined;
  await lockCounted(trx, article);
  const after = await trx
    .updateTable('articles')
    .set((eb) => ({ ...withheldFor('hidden', reason !== null)(eb), hidden_reason: reason }))
    .where('id', '=', article.id)
    .returning(['status', 'publish_at', 'published_at', 'withheld'])
    .executeTakeFirstOrThrow();
  return { wasPublic: isPublicNow(before, now), isPublic: isPublicNow(after, now) };
}

/**
 * Applies a partial update (content and lifecycle) and answers the article as its author sees it; undefined when it
 * vanished meanwhile. `precondition` (If-Match) runs first in the same transaction, so that nothing is written when
 * it fails. A transition is judged on the state readers see now: a scheduled article whose time has passed is
 * published, and its publication is recorded here first if the scheduler has not yet done so.
 */
export async function updateArticle(db: Executor, article: ArticleRef, changes: ArticleChanges, now: number, precondition?: Precondition) {
  const { status, publishAt, ...content } = changes;
  // Judged before any write, so that a refused transition (409, 422) costs no transaction.
  nextState(currentState(article, now), { status, publishAt }, now);
  // updatedAt must move on every update, even two within one millisecond.
  const updatedAt = Math.max(now, article.updated_at + 1);
  const titleChanged = content.title !== undefined && slugify(content.title) !== slugify(article.title);
  const tagList = content.tagList === undefined ? undefined : normalizeTags(content.tagList);
  const contentChanged = Object.values(content).some((value) => value !== undefined);
  const write = async (trx: Executor, slug?: string) => {
    let before = await storedState(trx, article.id);
    if (before === undefined) return undefined;
    await precondition?.(trx);
    if (currentState(before, now) !== before) {
      await recordDuePublication(trx, article.id, now);
      before = (await storedState(trx, article.id))!;
    }
    const next = nextState(before, { status, publishAt }, now);
    if (next !== undefined) await lockCounted(trx, article);
    await trx
      .updateTable('articles')
      .set({
        updated_at: updatedAt,
        ...(slug !== undefined && { slug }),
        ...(content.title !== undefined && { title: content.title }),
        ...(content.description !== undefined && { description: content.description }),
        ...(content.body !== undefined && { body: content.body }),
        // With the text, in one rewrite of the row and its search entry; the links below then leave it alone.
        ...(tagList !== undefined && { tag_list: JSON.stringify(tagList) }),
        ...(next !== undefined && { ...next, listed_at: listedAt({ ...next, withheld: before.withheld }) }),
      })
      .where('id', '=', article.id)
      .execute();
    if (tagList !== undefined) await replaceTags(trx, { ...article, ...before, ...next }, tagList);
    if (contentChanged) await keepEditedRevision(trx, article.id, before, { ...content, tagList }, updatedAt);
    const answer = await authorsView(trx, article.id, article.author_id);
    const after = { ...before, ...next };
    const event = { actorId: article.author_id, ownerId: article.author_id, articleId: article.id };
    const wasPublic = isPublicNow(before, now);
    const isPublic = isPublicNow(after, now);
    // A transition alone is told by its own event; any other update (an empty one too: updatedAt moved) is an update.
    const transitionOnly = !contentChanged && (status !== undefined || publishAt !== undefined);
    if (!transitionOnly) await appendEvent(trx, { ...event, type: 'article.updated', data: eventArticle(answer), public: isPublic }, now);
    if (!wasPublic && isPublic) await appendEvent(trx, { ...event, type: 'article.published', data: eventArticle(answer) }, now);
    if (wasPublic && !isPublic) {
      await appendEvent(trx, { ...event, type: 'article.unpublished', data: { article: mentionOf(answer.article) } }, now);
    }
    return answer;
  };
  return titleChanged ? withFreeSlug(db, content.title!, write) : inTransaction(db, (trx) => write(trx));
}

async function replaceTags(trx: Executor, article: Pick<ArticleRef, 'id' | 'withheld'> & StoredState, names: string[]): Promise<void> {
  const current = await trx
    .selectFrom('article_tags')
    .innerJoin('tags', 'tags.id', 'article_tags.tag_id')
    .select(['tags.id', 'tags.name'])
    .where('article_tags.article_id', '=', article.id)
    .execute();
  const wanted = new Set(names);
  const kept = new Set(current.map((tag) => tag.name));
  const removeIds = current.filter((tag) => !wanted.has(tag.name)).map((tag) => tag.id);
  const addIds = await lockTags(
    trx,
    names.filter((name) => !kept.has(name)),
    removeIds,
  );
  if (removeIds.length > 0) {
    await trx.deleteFrom('article_tags').where('article_id', '=', article.id).where('tag_id', 'in', removeIds).execute();
  }
  await linkTags(trx, article, addIds);
}

/**
 * Comments, favorites and tag links go by cascade, and the triggers on them move every count over them; on
 * PostgreSQL what they move is locked first (lockCounted). `precondition` (If-Match) runs once the article row is
 * locked. The event stays off the public stream when the article was not public.
 */
export function deleteArticle(db: Executor, article: ArticleRef, now: number, precondition?: Precondition): Promise<void> {
  return inTransaction(db, async (trx) => {
    await lockArticle(trx, article.id);
    await precondition?.(trx);
    await lockCounted(trx, article);
    const deleted = await trx.deleteFrom('articles').where('id', '=', article.id).executeTakeFirst();
    if (deleted.numDeletedRows === 0n) return;
    await appendEvent(
      trx,
      {
        type: 'article.deleted',
        actorId: article.author_id,
        ownerId: article.author_id,
        articleId: article.id,
        data: { article: mentionOf(article) },
        public: isPublicNow(article, now),
      },
      now,
    );
  });
}

/**
 * Idempotent: the composite key turns a repeated favorite into nothing, and the triggers count only real changes;
 * only a real change is an event. One statement that reads the article row, and on PostgreSQL locks it, before it
 * touches the favorite row: the order a delete of the article takes them, so the two cannot deadlock. A favorite of
 * an article deleted meanwhile writes nothing (the answer's read then finds no article), and neither a favorite nor
 * taking one back does across a block (profiles/blocks.ts), judged by the statement itself. Returns whether anything
 * changed.
 */
export function setFavorite(db: Executor, actor: Actor, article: ArticleRef, favorite: boolean, now: number) {
  const change = (executor: Executor) => {
    const theArticle = executor
      .selectFrom('articles')
      .where('articles.id', '=', article.id)
      .where((eb) => noBlockBetween(eb, executor, actor.id, eb.ref('articles.author_id')))
      .$if(dialectOf(executor) === 'postgres', (query) => query.forNoKeyUpdate());
    return favorite
      ? executor
          .insertInto('favorites')
          .columns(['user_id', 'article_id', 'article_listed_at', 'article_counted', 'created_at'])
          .expression(
            // Typed, because PostgreSQL reads an untyped parameter in a SELECT as text.
            theArticle.select((eb) => [
              eb.cast<number>(eb.val(actor.id), 'integer').as('user_id'),
              'articles.id',
              // What the link carries of its article (migration 0017).
              'articles.listed_at as article_listed_at',
              eb
                .case()
                .when(eb.and([eb('articles.status', '=', 'published'), eb('articles.withheld', '=', 0)]))
                .then(1)
                .else(0)
                .end()
                .as('article_counted'),
              eb.cast<number>(eb.val(now), 'bigint').as('created_at'),
            ]),
          )
          .onConflict((oc) => oc.columns(['user_id', 'article_id']).doNothing())
          .returning('article_id')
      : executor
          .deleteFrom('favorites')
          .where('user_id', '=', actor.id)
          .where('article_id', '=', theArticle.select('articles.id'))
          .returning('article_id');
  };
  return changeWithEvent(
    db,
    change,
    {
      type: favorite ? 'article.favorited' : 'article.unfavorited',
      actorId: actor.id,
      ownerId: article.author_id,
      articleId: article.id,
      data: { article: mentionOf(article), profile: toProfile({ ...actor, following: false }) },
    },
    now,
  );
}
