import type { Executor } from '../../db/index.js';
import { byCodePoint } from '../articles/queries.js';

/** Tags on at least one article, by the use counter kept with the links; ties by name in code-point order. */
export async function listTags(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('tags').select(['name', 'article_count']).where('article_count', '>', 0).execute();
  return rows.sort((a, b) => b.article_count - a.article_count || byCodePoint(a.name, b.name)).map((row) => row.name);
}
