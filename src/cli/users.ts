import type { DatabaseHandle } from '../db/index.js';
import type { Role } from '../db/schema.js';
import { HttpError } from '../errors.js';
import { findModeratedUser, setRole } from '../modules/moderation/actions.js';

/**
 * Sets an account's role from the command line: how the first admin is made, since only an admin may set roles
 * through the API. Audited with no actor, as the system.
 */
export async function setUserRole({ db }: DatabaseHandle, username: string, role: Role): Promise<string[]> {
  const user = await findModeratedUser(db, username).catch((error: unknown) => {
    throw error instanceof HttpError ? new Error(`no account is called ${username}`) : error;
  });
  if (user.role === role) return [`${user.username} is already ${role}`];
  await setRole(db, null, user, role, Date.now());
  return [`${user.username}: ${user.role} -> ${role}`];
}
