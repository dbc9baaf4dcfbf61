import type { Executor } from '../../db/index.js';
import { byCodePoint } from '../articles/tags.js';

/**
 * The `{ tags }` answer: tags on at least one article (a range of the popularity index), most used first by the
 * use counts the triggers keep; sorted here, ties by name in code-point order, the same on both databases.
 */
export async function getTagsAnswer(db: Executor): Promise<{ tags: string[] }> {
  const rows = await db.selectFrom('tags').select(['name', 'article_count']).where('article_count', '>', 0).execute();
  return { tags: rows.sort((a, b) => b.article_count - a.article_count || byCodePoint(a.name, b.name)).map((row) => row.name) };
}
