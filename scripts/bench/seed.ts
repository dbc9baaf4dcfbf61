import type { DatabaseConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/index.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { countTriggers } from '../../src/db/migrations/0005_counts_by_triggers.js';
import { hashPassword } from '../../src/modules/users/passwords.js';
import { openBulkWriter } from './bulk-writers.js';
import type { Progress } from './progress.js';
import { BENCH_PASSWORD, buildPlan, type Scale, tableLoads } from './seed-data.js';

/** The tables whose ids the database generates. */
const IDENTITY_TABLES = ['users', 'articles', 'tags', 'comments'] as const;

/** The schema exactly as the server builds it, so the bench measures the indexes and columns that ship. */
export async function migrate(database: DatabaseConfig): Promise<void> {
  const handle = openDatabase(database);
  try {
    await migrateToLatest(handle);
  } finally {
    await handle.destroy();
  }
}

/**
 * Migrates an empty database and fills it with `scale`'s rows in bulk, every counter column equal to the rows it
 * counts, as the server keeps them. Not through the API: a million articles would take hours that way.
 */
export async function seedDatabase(database: DatabaseConfig, scale: Scale, progress: Progress): Promise<void> {
  await progress.phase('schema', 0, () => migrate(database));
  // Argon2 is deliberately slow: one hash serves every account.
  const [plan, passwordHash] = await progress.phase('plan', 0, async () => [buildPlan(scale), await hashPassword(BENCH_PASSWORD)] as const);
  const writer = await openBulkWriter(database);
  // The count columns are written with the rows; the triggers would count every row a second time.
  const triggers = countTriggers(database.kind);
  try {
    for (const statement of triggers.drop) await writer.execute(statement);
    for (const load of tableLoads(plan, passwordHash)) {
      await progress.phase(load.table, load.rows, async (advance) => {
        for (const batch of load.batches()) {
          await writer.insert(load, batch);
          advance(batch[0]!.length);
        }
        await writer.flush();
      });
    }
    await progress.phase('counters', 0, async () => {
      // The migration created the stripes; the whole total may sit on one of them.
      await writer.execute(`update article_totals set articles = case when stripe = 0 then ${scale.articles} else 0 end`);
      for (const statement of triggers.create) await writer.execute(statement);
      await writer.followExplicitIds(IDENTITY_TABLES);
    });
    await progress.phase('analyze', 0, () => writer.analyze());
  } finally {
    await writer.close();
  }
}
