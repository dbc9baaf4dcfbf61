import type { MigrationResult } from 'kysely/migration';
import type { DatabaseHandle } from '../db/index.js';
import { createMigrator, migrateToLatest, unwrap } from '../db/migrate.js';
import { databaseMisconfiguration } from '../db/misconfigured.js';

const report = (results: MigrationResult[], verb: string, none: string) =>
  results.length === 0 ? [none] : results.map((result) => `${verb} ${result.migrationName}`);

// Progress goes to stderr, so that the lines the command prints stay its result.
export const migrateUp = async (database: DatabaseHandle) =>
  report(
    await migrateToLatest(database, (message) => process.stderr.write(`${message}\n`)),
    'applied',
    'nothing to apply: the database is up to date',
  );

/** Undoes only the latest applied migration: one step at a time, so a mistaken run costs as little as possible. */
export const migrateDown = async (database: DatabaseHandle) =>
  report(unwrap(await createMigrator(database).migrateDown()), 'reverted', 'nothing to revert: no migration is applied');

/** One line per known migration, oldest first: applied (with when) or pending. */
export async function migrationStatus(database: DatabaseHandle): Promise<string[]> {
  // Read outside a migration run, so no result set carries the failure for unwrap to explain.
  const migrations = await createMigrator(database)
    .getMigrations()
    .catch((error: unknown) => {
      throw databaseMisconfiguration(error) ?? error;
    });
  return migrations.map(({ name, executedAt }) => (executedAt ? `applied  ${name}  ${executedAt.toISOString()}` : `pending  ${name}`));
}
