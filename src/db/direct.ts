import type { DatabaseConfig } from '../config.js';
import { SettingError } from '../setting-error.js';

/**
 * DATABASE_URL goes through a pooler in transaction mode (PgBouncer): DATABASE_DIRECT_URL is set apart from it. Each
 * transaction, or statement outside one, may then run on another server connection, so nothing that lives in a
 * session (a LISTEN, a session's advisory lock, a setting changed without `local`) may go through DATABASE_URL.
 */
export const behindPooler = (config: DatabaseConfig): boolean => config.kind === 'postgres' && config.directUrl !== config.url;

/**
 * `config` for sessions of their own straight to PostgreSQL (DATABASE_DIRECT_URL), without DATABASE_STATEMENT_TIMEOUT:
 * the migrations, whose lock is a session's advisory lock, and the `conduit` commands, whose statements may rightly
 * run for minutes. No replicas: what these read must be what they wrote.
 */
export function directDatabase(config: DatabaseConfig): DatabaseConfig {
  if (config.kind === 'sqlite') return config;
  const { directUrl, poolSize, connectTimeoutMs, preparedStatements } = config;
  return { kind: 'postgres', url: directUrl, directUrl, poolSize, connectTimeoutMs, statementTimeoutMs: 0, preparedStatements };
}

/** `error`, naming DATABASE_DIRECT_URL rather than DATABASE_URL when the connection that failed was a direct one. */
export function blamingDirectUrl(config: DatabaseConfig, error: unknown): unknown {
  if (!behindPooler(config) || !(error instanceof SettingError) || error.setting !== 'DATABASE_URL') return error;
  return new SettingError('DATABASE_DIRECT_URL', error.problem, error.fix, { cause: error.cause });
}
