import { SqliteAdapter } from 'kysely';

/**
 * Kysely puts a lock of its own in front of a driver whose adapter says it has one connection, and that lock wakes
 * every waiter at each release (all but one go back to waiting: under a burst of 50 queued writes, a sixth of all
 * memory allocated). The SQLite drivers here queue writes at the writer themselves (and the search reader
 * at its worker), so Kysely is told not to.
 */
export class SqliteAdapterWithOwnQueue extends SqliteAdapter {
  override get supportsMultipleConnections(): boolean {
    return true;
  }
}
