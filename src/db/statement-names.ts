/**
 * Names for the statement texts that prepared queries (prepared.ts) send to PostgreSQL, which then parses and plans
 * each text once per connection (drivers/postgres.ts) instead of on every request: a list page's statement took
 * 2.2 ms of round trip unnamed against 0.6-1.0 ms named (pg, this machine, the bench's small database).
 *
 * The first NAMED_TEXTS_MAX texts get a name, which they keep: the common shapes come first in any traffic, and a
 * client that asks for many rare shapes (every page size with every filter) gets unnamed statements, as before,
 * rather than growing the name table.
 */
const NAMED_TEXTS_MAX = 1000;

const names = new Map<string, string>();

export function nameStatement(text: string): void {
  if (names.size < NAMED_TEXTS_MAX && !names.has(text)) names.set(text, `conduit_${names.size + 1}`);
}

export const statementName = (text: string): string | undefined => names.get(text);
