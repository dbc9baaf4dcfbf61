import type { FastifyRequest } from 'fastify';
import type { Role } from '../../db/schema.js';
import { moderationForbidden } from '../../errors.js';
import { signedIn } from '../users/auth.js';
import type { Account } from '../users/queries.js';

const RANK: Record<Role, number> = { user: 0, moderator: 1, admin: 2 };

/**
 * The one place roles are judged. Moderation routes call `moderatorOf` first (a plain user gets 403 as the contract
 * says), then `mayActOn` for the account the action reaches: nobody acts on an equal or higher role, so moderators
 * cannot act on each other and nobody on an admin.
 */
export function moderatorOf(request: FastifyRequest, least: Exclude<Role, 'user'> = 'moderator'): Account {
  const { account } = signedIn(request);
  if (RANK[account.role] < RANK[least]) throw moderationForbidden();
  return account;
}

export function mayActOn(actor: Pick<Account, 'role' | 'id'>, target: { id: number; role: Role }): void {
  if (actor.id === target.id || RANK[actor.role] <= RANK[target.role]) throw moderationForbidden();
}

/** Whether the signed-in caller moderates: they read every article and comment, hidden or not, by its address. */
export const readsAsModerator = (request: FastifyRequest): boolean =>
  request.currentUser !== null && RANK[request.currentUser.account.role] >= RANK.moderator;

/**
 * When a suspension ends: undefined while the account is not suspended (never, lifted, or its end has passed, so it
 * lifts itself without a job), null while it lasts until lifted.
 */
export function suspendedUntil(account: Pick<Account, 'suspended_at' | 'suspended_until'>, now: number): number | null | undefined {
  if (account.suspended_at === null) return undefined;
  if (account.suspended_until !== null && account.suspended_until <= now) return undefined;
  return account.suspended_until;
}
