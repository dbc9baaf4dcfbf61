import { SettingError, systemProblem } from '../setting-error.js';
import { asDriverError } from './constraints.js';

/**
 * Errors that mean DATABASE_URL points where no usable PostgreSQL database is: at start they are the operator's
 * to fix, so they are told which setting and how instead of a driver message. At request time the same errors
 * are an outage (503, see unavailable.ts), not a misconfiguration.
 */

type ConnectError = NodeJS.ErrnoException & { address?: string; port?: number; hostname?: string };

const CHECK_SERVER = 'check the host and port, and that the server is running';
// SQLSTATE 3D000 is invalid_catalog_name; 28000 and 28P01 are a refused role and a wrong password.
const MISSING_DATABASE = '3D000';
const REFUSED_LOGIN = new Set(['28000', '28P01']);
const NOT_ANSWERED = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);
const UNKNOWN_HOST = new Set(['ENOTFOUND', 'EAI_AGAIN']);
// pg's own words when the connect timeout ends an attempt, or the server hangs up before it speaks the protocol.
const NO_HANDSHAKE = new Set([
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
  'Connection terminated unexpectedly',
]);
/** PgBouncer refuses a login with 08P01 (protocol violation), whatever the reason: its message tells which. */
const POOLER_REFUSAL = '08P01';

/** `error` as a SettingError naming DATABASE_URL when it says the database cannot be reached or entered; else `undefined`. */
export function databaseMisconfiguration(error: unknown): SettingError | undefined {
  const { code, message } = asDriverError(error);
  const connect = error as ConnectError;
  const setting = (problem: string, fix: string) => new SettingError('DATABASE_URL', problem, fix, { cause: error });
  if (typeof code === 'string') {
    if (NOT_ANSWERED.has(code)) {
      return setting(`cannot connect to PostgreSQL at ${connect.address}:${connect.port} (${systemProblem(error)})`, CHECK_SERVER);
    }
    if (UNKNOWN_HOST.has(code)) {
      return setting(`cannot connect to PostgreSQL at ${connect.hostname} (${systemProblem(error)})`, 'check the host name');
    }
    const pooler = code === POOLER_REFUSAL ? String(message) : '';
    if (code === MISSING_DATABASE || /^database ".*" does not exist$/.test(pooler))
      return setting(`PostgreSQL says ${message}`, 'create it, or fix the database name at the end of the URL');
    if (REFUSED_LOGIN.has(code)) return setting(`PostgreSQL refused the login: ${message}`, 'check the user name and password in the URL');
    if (/authentication failed|no such user/.test(pooler)) {
      return setting(`the pooler refused the login: ${pooler}`, "check the user name and password in the URL, and the pooler's users");
    }
    if (pooler.startsWith('unsupported startup parameter')) {
      return setting(`the pooler says ${pooler}`, 'set DATABASE_DIRECT_URL to PostgreSQL itself: it tells the server a pooler is in front');
    }
  }
  if (typeof message === 'string' && NO_HANDSHAKE.has(message)) {
    return setting(
      `PostgreSQL did not answer (${message.toLowerCase()})`,
      `${CHECK_SERVER}, that it is PostgreSQL, and that DATABASE_CONNECT_TIMEOUT gives it enough time`,
    );
  }
  return undefined;
}
