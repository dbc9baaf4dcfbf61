import { Migrator, type Migration, type MigrationResultSet } from 'kysely';
import type { DatabaseHandle } from './index.js';
import { initialSchema } from './migrations/0001_initial.js';

/** Migrations are imported, not read from a folder, so the compiled build and the tests see the same set. */
export function createMigrator({ db, dialect }: DatabaseHandle): Migrator {
  const migrations: Record<string, Migration> = {
    '0001_initial': initialSchema(dialect),
  };
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
  });
}

function unwrap({ error, results }: MigrationResultSet): void {
  if (error) {
    const failed = results?.find((result) => result.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${String(error)}`, { cause: error });
  }
}

export async function migrateToLatest(handle: DatabaseHandle): Promise<void> {
  unwrap(await createMigrator(handle).migrateToLatest());
}
