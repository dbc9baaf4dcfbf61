import { readCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { perDatabase } from '../../db/per-database.js';
import { VersionedCache } from '../../db/versioned-cache.js';
import { shareAnswer } from '../../shared-answers.js';
import { byCodePoint } from '../articles/tags.js';

/** Tags on at least one article, by the use counter kept with the links; ties by name in code-point order. */
async function listTags(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('tags').select(['name', 'article_count']).where('article_count', '>', 0).execute();
  return rows.sort((a, b) => b.article_count - a.article_count || byCodePoint(a.name, b.name)).map((row) => row.name);
}

const cacheFor = perDatabase((db) => new VersionedCache<{ tags: string[] }>(db, 1));

/**
 * The `{ tags }` answer, re-read only when the tag-usage version has moved: every change of a tag's use count
 * moves it in the same transaction, so one primary-key read tells whether the list changed, also for changes
 * made by other processes. The answer is shared (see shareAnswer).
 */
export async function getTagsAnswer(db: Executor): Promise<{ tags: string[] }> {
  return cacheFor(db).get(await readCounter(db, 'tag_usage_version'), 'tags', async () => shareAnswer({ tags: await listTags(db) }));
}
