/**
 * A setting that passed validation but does not work where the server runs: a database that refuses the
 * connection, a folder that cannot be written. The CLI prints it as one line, so an operator reads which
 * variable to change and how, instead of a driver's stack trace.
 */
export class SettingError extends Error {
  constructor(
    readonly setting: string,
    readonly problem: string,
    readonly fix: string,
    options?: ErrorOptions,
  ) {
    super(`${setting}: ${problem}; ${fix}`, options);
    this.name = 'SettingError';
  }
}

/** What the system error codes a misconfiguration produces mean, in the words an operator would use. */
const SYSTEM_PROBLEMS: Record<string, string> = {
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOTDIR: 'part of the path is a file, not a folder',
  EEXIST: 'part of the path is a file, not a folder',
  // better-sqlite3's codes for a file it may not create or write.
  SQLITE_CANTOPEN: 'cannot create or open the file',
  SQLITE_READONLY: 'read-only file',
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

export const systemProblem = (error: unknown): string | undefined => SYSTEM_PROBLEMS[(error as NodeJS.ErrnoException)?.code ?? ''];

/** Creating or writing files fails with these when a folder is not writable, whoever the process runs as. */
const UNWRITABLE = new Set(['EROFS', 'EACCES', 'EPERM', 'ENOTDIR', 'EEXIST', 'SQLITE_CANTOPEN', 'SQLITE_READONLY']);

/** `error` as the setting that put the files there to blame, when it says the place is not writable; else `error` itself. */
export function unwritable(error: unknown, setting: string, what: string, fix: string): unknown {
  if (!UNWRITABLE.has((error as NodeJS.ErrnoException)?.code ?? '')) return error;
  return new SettingError(setting, `cannot write ${what} (${systemProblem(error)})`, fix, { cause: error });
}
