import { uniqueViolation } from '../../db/constraints.js';
import { dialectOf, type Executor } from '../../db/index.js';
import { inTransaction, type Precondition } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import { toIso } from '../../schemas.js';
import { appendEvent, changeWithEvent, mentionOf } from '../events/outbox.js';
import { toProfile } from '../profiles/queries.js';
import type { Account } from '../users/queries.js';
import type { ArticleChanges, NewArticle } from './schemas.js';
import { slugify, suffixed } from './slug.js';
import { byCodePoint, normalizeTags } from './tags.js';
import { getArticleAnswer } from './view.js';

const SLUG_ATTEMPTS = 5;

/** Who does a write, with what the event shows of them. */
export type Actor = Pick<Account, 'id' | 'username' | 'bio' | 'image'>;

/** The few columns that decide existence and ownership, before any write. */
export function findArticleRef(db: Executor, slug: string) {
  return db
    .selectFrom('articles')
    .select(['id', 'slug', 'author_id', 'title', 'created_at', 'updated_at'])
    .where('slug', '=', slug)
    .executeTakeFirst();
}

export type ArticleRef = NonNullable<Awaited<ReturnType<typeof findArticleRef>>>;

/** The article's ref, or the contract's 404 when no article has that slug. */
export async function existingArticleRef(db: Executor, slug: string) {
  const article = await findArticleRef(db, slug);
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

function linkTags(trx: Executor, article: Pick<ArticleRef, 'id' | 'created_at'>, tagIds: number[]) {
  if (tagIds.length === 0) return Promise.resolve();
  return trx
    .insertInto('article_tags')
    .values(tagIds.map((tag_id) => ({ article_id: article.id, tag_id, article_created_at: article.created_at })))
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

/**
 * The updated article as its author now sees it, read inside the write's transaction: the answer to the request, and
 * (with `favorited` as anyone else sees it) the event's data. The author never follows themselves, so only that flag
 * differs.
 */
async function recordUpdate(trx: Executor, id: number, authorId: number, now: number): Promise<ArticleAnswer> {
  const answer = await getArticleAnswer(trx, { id }, authorId);
  if (answer === undefined) throw new Error(`article ${id} vanished inside its own transaction`);
  const data = { article: { ...answer.article, favorited: false } };
  await appendEvent(trx, { type: 'article.updated', actorId: authorId, ownerId: authorId, articleId: id, data }, now);
  return answer;
}

/**
 * Creates the article and answers it as its author sees it, built from what was written instead of read back: a new
 * article has no favorites, and its author follows nobody as themselves. The event carries the same article.
 */
export function createArticle(db: Executor, author: Actor, article: NewArticle, now: number): Promise<ArticleAnswer> {
  const tagList = normalizeTags(article.tagList ?? []);
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
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await linkTags(trx, { id, created_at: now }, tagIds);
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
        body: article.body,
      },
    };
    await appendEvent(trx, { type: 'article.created', actorId: author.id, ownerId: author.id, articleId: id, data: answer }, now);
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
 * Applies a partial update and answers the article as its author sees it; undefined when it vanished meanwhile.
 * `precondition` (If-Match) runs first in the same transaction, so that nothing is written when it fails.
 */
export async function updateArticle(db: Executor, article: ArticleRef, changes: ArticleChanges, now: number, precondition?: Precondition) {
  // updatedAt must move on every update, even two within one millisecond.
  const updatedAt = Math.max(now, article.updated_at + 1);
  const titleChanged = changes.title !== undefined && slugify(changes.title) !== slugify(article.title);
  const tagList = changes.tagList === undefined ? undefined : normalizeTags(changes.tagList);
  const write = async (trx: Executor, slug?: string) => {
    if (precondition !== undefined) {
      await lockArticle(trx, article.id);
      await precondition(trx);
    }
    const result = await trx
      .updateTable('articles')
      .set({
        updated_at: updatedAt,
        ...(slug !== undefined && { slug }),
        ...(changes.title !== undefined && { title: changes.title }),
        ...(changes.description !== undefined && { description: changes.description }),
        ...(changes.body !== undefined && { body: changes.body }),
        // With the text, in one rewrite of the row and its search entry; the links below then leave it alone.
        ...(tagList !== undefined && { tag_list: JSON.stringify(tagList) }),
      })
      .where('id', '=', article.id)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) return undefined;
    if (tagList !== undefined) await replaceTags(trx, article, tagList);
    return recordUpdate(trx, article.id, article.author_id, now);
  };
  return titleChanged ? withFreeSlug(db, changes.title!, write) : inTransaction(db, (trx) => write(trx));
}

async function replaceTags(trx: Executor, article: ArticleRef, names: string[]): Promise<void> {
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
 * Comments, favorites and tag links go by cascade, and the triggers on them move every count over them. On
 * PostgreSQL the article row, its tags, and the users whose counts the cascade moves (the author and everyone who
 * favorited it, in id order) are locked first, in the order every other write takes them: two deletes whose
 * authors favorited each other's articles would otherwise lock those two users in opposite orders. `precondition`
 * (If-Match) runs once the article row is locked.
 */
export function deleteArticle(db: Executor, article: ArticleRef, now: number, precondition?: Precondition): Promise<void> {
  return inTransaction(db, async (trx) => {
    await lockArticle(trx, article.id);
    await precondition?.(trx);
    if (dialectOf(trx) === 'postgres') {
      const links = await trx.selectFrom('article_tags').select('tag_id').where('article_id', '=', article.id).execute();
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
            eb('id', 'in', eb.selectFrom('favorites').select('user_id').where('article_id', '=', article.id)),
          ]),
        )
        .orderBy('id')
        .forNoKeyUpdate()
        .execute();
    }
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
      },
      now,
    );
  });
}

/**
 * Idempotent: the composite key turns a repeated favorite into nothing, and the triggers count only real changes;
 * only a real change is an event. One statement that reads the article row, and on PostgreSQL locks it, before it
 * touches the favorite row: the order a delete of the article takes them, so the two cannot deadlock. A favorite of
 * an article deleted meanwhile writes nothing; the answer's read then finds no article.
 */
export function setFavorite(db: Executor, actor: Actor, article: ArticleRef, favorite: boolean, now: number) {
  const change = (executor: Executor) => {
    const theArticle = executor
      .selectFrom('articles')
      .where('articles.id', '=', article.id)
      .$if(dialectOf(executor) === 'postgres', (query) => query.forNoKeyUpdate());
    return favorite
      ? executor
          .insertInto('favorites')
          .columns(['user_id', 'article_id', 'article_created_at', 'created_at'])
          .expression(
            // Typed, because PostgreSQL reads an untyped parameter in a SELECT as text.
            theArticle.select((eb) => [
              eb.cast<number>(eb.val(actor.id), 'integer').as('user_id'),
              'articles.id',
              'articles.created_at',
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
