import { sql } from 'kysely';
import { type Migration, type MigrationResult, type MigrationResultSet, Migrator } from 'kysely/migration';
import type { DatabaseConfig } from '../config.js';
import { behindPooler, blamingDirectUrl, directDatabase } from './direct.js';
import { type DatabaseHandle, type Executor, openDatabase } from './index.js';
import { initialSchema } from './migrations/0001_initial.js';
import { idempotencyKeys } from './migrations/0002_idempotency_keys.js';
import { listCounters } from './migrations/0003_list_counters.js';
import { accountVersion } from './migrations/0004_account_version.js';
import { countsByTriggers } from './migrations/0005_counts_by_triggers.js';
import { tagListOrder } from './migrations/0006_tag_list_order.js';
import { usernameSkeletons } from './migrations/0007_username_skeletons.js';
import { routeWordSlugs } from './migrations/0008_route_word_slugs.js';
import { events } from './migrations/0009_events.js';
import { webhookQueue } from './migrations/0010_webhook_queue.js';
import { articleSearch, type MigrationProgress } from './migrations/0011_article_search.js';
import { tagListWithArticle } from './migrations/0012_tag_list_with_article.js';
import { articleLifecycle } from './migrations/0013_article_lifecycle.js';
import { articleRevisions } from './migrations/0014_article_revisions.js';
import { accountDeletion } from './migrations/0015_account_deletion.js';
import { accountExport } from './migrations/0016_account_export.js';
import { scheduledLinkKeys } from './migrations/0017_scheduled_link_keys.js';
import { moderation } from './migrations/0018_moderation.js';
import { confusablesUnicode17 } from './migrations/0019_confusables_unicode_17.js';
import { webhookFairShare } from './migrations/0020_webhook_fair_share.js';
import { profileTime } from './migrations/0021_profile_time.js';
import { screenedIds } from './migrations/0022_screened_ids.js';
import { withoutSqliteSamples } from './migrations/0023_without_sqlite_samples.js';
import { databaseMisconfiguration } from './misconfigured.js';

/**
 * Migrations are imported, not read from a folder, so the compiled build and the tests see the same set. The long
 * ones (building an index over every article) tell `progress` how far they are.
 */
export function createMigrator({ db, dialect }: DatabaseHandle, progress: MigrationProgress = () => {}): Migrator {
  const migrations: Record<string, Migration> = {
    '0001_initial': initialSchema(dialect),
    '0002_idempotency_keys': idempotencyKeys,
    '0003_list_counters': listCounters,
    '0004_account_version': accountVersion(dialect),
    '0005_counts_by_triggers': countsByTriggers(dialect),
    '0006_tag_list_order': tagListOrder(dialect),
    '0007_username_skeletons': usernameSkeletons,
    '0008_route_word_slugs': routeWordSlugs,
    '0009_events': events(dialect),
    '0010_webhook_queue': webhookQueue,
    '0011_article_search': articleSearch(dialect, progress),
    '0012_tag_list_with_article': tagListWithArticle(dialect),
    '0013_article_lifecycle': articleLifecycle(dialect, progress),
    '0014_article_revisions': articleRevisions(dialect, progress),
    '0015_account_deletion': accountDeletion,
    '0016_account_export': accountExport(dialect),
    '0017_scheduled_link_keys': scheduledLinkKeys(dialect),
    '0018_moderation': moderation(dialect),
    '0019_confusables_unicode_17': confusablesUnicode17,
    '0020_webhook_fair_share': webhookFairShare,
    '0021_profile_time': profileTime,
    '0022_screened_ids': screenedIds(dialect),
    '0023_without_sqlite_samples': withoutSqliteSamples(dialect),
  };
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
  });
}

/**
 * The migrations a run executed, or the failure as an Error naming the migration that broke; a database that
 * cannot be reached at all is a DATABASE_URL to fix, which no migration is to blame for.
 */
export function unwrap({ error, results }: MigrationResultSet): MigrationResult[] {
  if (error) {
    const misconfigured = databaseMisconfiguration(error);
    if (misconfigured) throw misconfigured;
    const failed = results?.find((result) => result.status === 'Error');
    // No failed migration means the run broke before any began: reading or locking the migration tables.
    const what = failed ? `migration ${failed.migrationName} failed` : 'the migrations could not start';
    throw new Error(`${what}: ${String(error)}`, { cause: error });
  }
  return results ?? [];
}

/**
 * Runs `work` on one connection without DATABASE_STATEMENT_TIMEOUT, which is for requests: a migration may index
 * every article, and a process that starts meanwhile waits at the migration lock until the first one is done.
 */
async function withoutStatementTimeout<T>(handle: DatabaseHandle, work: (db: Executor) => Promise<T>): Promise<T> {
  if (handle.dialect === 'sqlite') return work(handle.db);
  return handle.db.connection().execute(async (connection) => {
    await sql`set statement_timeout = 0`.execute(connection);
    try {
      return await work(connection);
    } finally {
      // The connection goes back to the pool that serves requests.
      await sql`reset statement_timeout`.execute(connection);
    }
  });
}

export async function migrateToLatest(handle: DatabaseHandle, progress?: MigrationProgress): Promise<MigrationResult[]> {
  const outcome = await withoutStatementTimeout(handle, (db) => createMigrator({ ...handle, db }, progress).migrateToLatest()).catch(
    // The migrator reports its own failures; a database that cannot even lend a connection is judged the same way.
    (error: unknown): MigrationResultSet => ({ error }),
  );
  return unwrap(outcome);
}

/** Migrates over a connection opened for it straight to PostgreSQL (DATABASE_DIRECT_URL), then closes it. */
async function migrateDirectly(config: DatabaseConfig, progress?: MigrationProgress): Promise<MigrationResult[]> {
  const direct = openDatabase(directDatabase(config));
  try {
    return await migrateToLatest(direct, progress);
  } catch (error) {
    throw blamingDirectUrl(config, error);
  } finally {
    await direct.destroy();
  }
}

/**
 * The migrations at the server's start, on its own handle; behind a pooler, straight to PostgreSQL instead: the
 * migration lock is a session's advisory lock, and the lifted timeout a session's setting, which a pooler in
 * transaction mode would leave on whichever server connection it chose. Then `handle` is tried once, so that a
 * DATABASE_URL that leads nowhere stops the start as it would without a pooler, rather than fail every request.
 */
export async function migrateOnStart(
  config: DatabaseConfig,
  handle: DatabaseHandle,
  progress?: MigrationProgress,
): Promise<MigrationResult[]> {
  if (!behindPooler(config)) return migrateToLatest(handle, progress);
  const results = await migrateDirectly(config, progress);
  await handle.ping().catch((error: unknown) => {
    throw databaseMisconfiguration(error) ?? error;
  });
  return results;
}
