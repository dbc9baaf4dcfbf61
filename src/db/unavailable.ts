import { asDriverError } from './constraints.js';

/**
 * Recognises errors that mean the database cannot take any work right now, whatever the request: it is down,
 * restarting, unreachable or locked by someone else for longer than we wait. They are worth a retry (503), unlike
 * errors in the request or in our SQL (500).
 */

// PostgreSQL's SQLSTATE class 08 is "connection exception"; 57P01-57P03 say the server is shutting down, crashed,
// or is not accepting connections yet.
const POSTGRES_SHUTDOWN_CODES = new Set(['57P01', '57P02', '57P03']);
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
// pg raises these without a code: a connection lost mid-query, a client that lost it earlier, and the connect timeout.
const PG_CONNECTION_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Client has encountered a connection error and is not queryable',
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
]);
// better-sqlite3 gives extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED_SHAREDCACHE), each starting with its primary.
const SQLITE_LOCK_CODE = /^SQLITE_(BUSY|LOCKED)/;

export function isUnavailable(error: unknown): boolean {
  const { code, message } = asDriverError(error);
  if (typeof code === 'string') {
    if (code.startsWith('08') || POSTGRES_SHUTDOWN_CODES.has(code) || NETWORK_CODES.has(code)) return true;
    if (SQLITE_LOCK_CODE.test(code)) return true;
  }
  return typeof message === 'string' && PG_CONNECTION_MESSAGES.has(message);
}

/**
 * PostgreSQL's query_canceled: a statement ran past its statement_timeout (DATABASE_STATEMENT_TIMEOUT, or a shorter
 * one a query set for itself), or an operator cancelled it.
 */
export const isQueryCanceled = (error: unknown): boolean => asDriverError(error).code === '57014';
