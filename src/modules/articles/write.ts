import { uniqueViolation } from '../../db/constraints.js';
import { dialectOf, type Executor } from '../../db/index.js';
import { inTransaction } from '../../db/transaction.js';
import { notFound } from '../../errors.js';
import type { ArticleChanges, NewArticle } from './schemas.js';
import { slugify, suffixed } from './slug.js';
import { byCodePoint, normalizeTags } from './tags.js';

const SLUG_ATTEMPTS = 5;

/** The few columns that decide existence and ownership, before any write. */
export function findArticleRef(db: Executor, slug: string) {
  return db
    .selectFrom('articles')
    .select(['id', 'author_id', 'title', 'created_at', 'updated_at'])
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

export function createArticle(db: Executor, authorId: number, article: NewArticle, now: number): Promise<number> {
  return withFreeSlug(db, article.title, async (trx, slug) => {
    // The new article row is the one lock no one else can be waiting for, so its tags go first here.
    const tagIds = await lockTags(trx, normalizeTags(article.tagList ?? []));
    const { id } = await trx
      .insertInto('articles')
      .values({
        slug,
        title: article.title,
        description: article.description,
        body: article.body,
        author_id: authorId,
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await linkTags(trx, { id, created_at: now }, tagIds);
    return id;
  });
}

/** Applies a partial update; returns false when the article vanished meanwhile. */
export async function updateArticle(db: Executor, article: ArticleRef, changes: ArticleChanges, now: number) {
  // updatedAt must move on every update, even two within one millisecond.
  const updatedAt = Math.max(now, article.updated_at + 1);
  const titleChanged = changes.title !== undefined && slugify(changes.title) !== slugify(article.title);
  const write = async (trx: Executor, slug?: string) => {
    const result = await trx
      .updateTable('articles')
      .set({
        updated_at: updatedAt,
        ...(slug !== undefined && { slug }),
        ...(changes.title !== undefined && { title: changes.title }),
        ...(changes.description !== undefined && { description: changes.description }),
        ...(changes.body !== undefined && { body: changes.body }),
      })
      .where('id', '=', article.id)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) return false;
    if (changes.tagList !== undefined) await replaceTags(trx, article, normalizeTags(changes.tagList));
    return true;
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
 * authors favorited each other's articles would otherwise lock those two users in opposite orders.
 */
export function deleteArticle(db: Executor, article: Pick<ArticleRef, 'id' | 'author_id'>): Promise<void> {
  return inTransaction(db, async (trx) => {
    if (dialectOf(trx) === 'postgres') {
      await trx.selectFrom('articles').select('id').where('id', '=', article.id).forUpdate().execute();
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
    await trx.deleteFrom('articles').where('id', '=', article.id).execute();
  });
}

/**
 * Idempotent: the composite key turns a repeated favorite into nothing, and the triggers count only real changes.
 * One statement that reads the article row, and on PostgreSQL locks it, before it touches the favorite row: the
 * order a delete of the article takes them, so the two cannot deadlock. A favorite of an article deleted
 * meanwhile writes nothing; the answer's read then finds no article.
 */
export async function setFavorite(db: Executor, userId: number, article: Pick<ArticleRef, 'id'>, favorite: boolean, now: number) {
  const locksRows = dialectOf(db) === 'postgres';
  const theArticle = db
    .selectFrom('articles')
    .where('articles.id', '=', article.id)
    .$if(locksRows, (query) => query.forNoKeyUpdate());
  if (favorite) {
    await db
      .insertInto('favorites')
      .columns(['user_id', 'article_id', 'article_created_at', 'created_at'])
      .expression(
        // Typed, because PostgreSQL reads an untyped parameter in a SELECT as text.
        theArticle.select((eb) => [
          eb.cast<number>(eb.val(userId), 'integer').as('user_id'),
          'articles.id',
          'articles.created_at',
          eb.cast<number>(eb.val(now), 'bigint').as('created_at'),
        ]),
      )
      .onConflict((oc) => oc.columns(['user_id', 'article_id']).doNothing())
      .execute();
  } else {
    await db.deleteFrom('favorites').where('user_id', '=', userId).where('article_id', '=', theArticle.select('articles.id')).execute();
  }
}
