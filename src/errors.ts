/**
 * Domain errors carry the contract's status and `{"errors": {...}}` body; handlers throw them and
 * the error plugin is the only place that turns anything into a response.
 */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly errors: Record<string, string[]>,
  ) {
    super(
      Object.entries(errors)
        .map(([key, messages]) => `${key} ${messages.join(', ')}`)
        .join('; '),
    );
    this.name = 'HttpError';
  }
}

export type TokenProblem = 'is missing' | 'is invalid' | 'has expired';
export type Resource = 'article' | 'profile' | 'comment' | 'webhook' | 'event' | 'tag' | 'revision' | 'deletion' | 'report' | 'decision';

export const unauthorized = (problem: TokenProblem) => new HttpError(401, { token: [problem] });
export const invalidCredentials = () => new HttpError(401, { credentials: ['invalid'] });
export const unprocessable = (field: string, message: string) => new HttpError(422, { [field]: [message] });
export const alreadyTaken = (field: string) => new HttpError(409, { [field]: ['has already been taken'] });
/** The 409 of a username whose skeleton (identity.ts) is another account's, or a purged one's while it is reserved. */
export const LOOKALIKE_USERNAME = 'looks too much like an existing username';
/** A write by an account that is leaving: it must cancel its deletion first (users/leaving.ts). */
export const accountLeaving = () => new HttpError(403, { account: ['is being deleted'] });
/** A moderation route called by someone who does not outrank its target (modules/moderation/roles.ts). */
export const moderationForbidden = () => new HttpError(403, { moderation: ['forbidden'] });
/** A write by a suspended account; the message names the end of the suspension when it has one. */
export const accountSuspended = (until: number | null) =>
  new HttpError(403, { account: [until === null ? 'suspended' : `suspended until ${new Date(until).toISOString()}`] });
/** A lifecycle transition the article's current state does not allow. */
export const conflict = (field: string, message: string) => new HttpError(409, { [field]: [message] });
export const notFound = (resource: Resource) => new HttpError(404, { [resource]: ['not found'] });
export const forbidden = (resource: Resource) => new HttpError(403, { [resource]: ['forbidden'] });
/** Any limit on how much one client may do; the caller sets `Retry-After`. */
export const rateLimited = () => new HttpError(429, { rate: ['limit exceeded'] });
/** The client's copy (If-Match) is not the current version: nothing was written. */
export const preconditionFailed = () => new HttpError(412, { 'If-Match': ['does not match the current version'] });
