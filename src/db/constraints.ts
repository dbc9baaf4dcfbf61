/**
 * Recognises constraint violations from either driver, so that the database stays the judge of
 * uniqueness and existence and the API still answers with the contract's bodies.
 */

type UniqueField = 'username' | 'lookalike' | 'email' | 'slug';

interface DriverError {
  code?: unknown;
  constraint?: unknown;
  message?: unknown;
}

// PostgreSQL reports the constraint name; SQLite reports "table.column" in its message.
const UNIQUE_FIELDS: Array<{ constraint: string; column: string; field: UniqueField }> = [
  { constraint: 'users_username_key_unique', column: 'users.username_key', field: 'username' },
  { constraint: 'users_username_skeleton_unique', column: 'users.username_skeleton', field: 'lookalike' },
  { constraint: 'users_email_key_unique', column: 'users.email_key', field: 'email' },
  { constraint: 'articles_slug_unique', column: 'articles.slug', field: 'slug' },
];

export function asDriverError(error: unknown): DriverError {
  return typeof error === 'object' && error !== null ? (error as DriverError) : {};
}

export function uniqueViolation(error: unknown): UniqueField | null {
  const { code, constraint, message } = asDriverError(error);
  if (code === '23505') {
    return UNIQUE_FIELDS.find((entry) => entry.constraint === constraint)?.field ?? null;
  }
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' && typeof message === 'string') {
    return UNIQUE_FIELDS.find((entry) => message.endsWith(`: ${entry.column}`))?.field ?? null;
  }
  return null;
}

export function isForeignKeyViolation(error: unknown): boolean {
  const { code } = asDriverError(error);
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}
