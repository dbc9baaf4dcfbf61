import type { ArticleStatus } from '../../db/schema.js';
import { conflict, unprocessable } from '../../errors.js';

/** How far ahead an article may be scheduled. */
export const SCHEDULE_AHEAD_MAX_MS = 366 * 24 * 60 * 60 * 1000;

/** What the articles row stores of the lifecycle. */
export interface StoredState {
  status: ArticleStatus;
  publish_at: number | null;
  published_at: number | null;
}

/** What a create or an update asks of it; both optional. */
export interface RequestedState {
  status?: ArticleStatus;
  /** ISO time, or null to clear it (only meaningful when leaving `scheduled`). */
  publishAt?: string | null;
}

/** The transitions the contract allows, besides staying in the same state (a no-op; a reschedule for `scheduled`). */
const ALLOWED: Record<ArticleStatus, readonly ArticleStatus[]> = {
  draft: ['scheduled', 'published'],
  scheduled: ['draft', 'published', 'scheduled'],
  published: ['unpublished'],
  unpublished: ['published', 'scheduled', 'draft'],
};

/** A publishAt the contract accepts: in the future, at most a year ahead. */
function scheduledTime(publishAt: string | null | undefined, now: number): number {
  if (publishAt === undefined || publishAt === null) throw unprocessable('publishAt', "can't be blank when scheduling");
  const time = Date.parse(publishAt);
  if (Number.isNaN(time)) throw unprocessable('publishAt', 'is not a valid time');
  if (time <= now) throw unprocessable('publishAt', 'must be in the future');
  if (time - now > SCHEDULE_AHEAD_MAX_MS) throw unprocessable('publishAt', 'must be at most a year ahead');
  return time;
}

/** The status asked for: `publishAt` alone means scheduling. */
function wanted(requested: RequestedState): ArticleStatus | undefined {
  if (requested.status !== undefined) return requested.status;
  return requested.publishAt === undefined || requested.publishAt === null ? undefined : 'scheduled';
}

/** The state a new article starts in: published at once unless the request says otherwise. */
export function initialState(requested: RequestedState, now: number): StoredState {
  const status = wanted(requested) ?? 'published';
  if (status === 'scheduled') return { status, publish_at: scheduledTime(requested.publishAt, now), published_at: null };
  if (requested.publishAt !== undefined && requested.publishAt !== null) {
    throw unprocessable('publishAt', 'can only be given when scheduling');
  }
  return { status, publish_at: null, published_at: status === 'published' ? now : null };
}

/**
 * The state after an update asks for `requested` of an article in `current` (as readers see it now: a scheduled
 * article whose time has passed is published by then), or undefined when nothing changes. A transition the
 * contract does not allow is the contract's 409.
 */
export function nextState(current: StoredState, requested: RequestedState, now: number): StoredState | undefined {
  const status = wanted(requested);
  if (status === undefined) {
    if (requested.publishAt === null && current.status === 'scheduled') {
      throw unprocessable('publishAt', "can't be blank when scheduling");
    }
    return undefined;
  }
  if (status !== 'scheduled' && requested.publishAt !== undefined && requested.publishAt !== null) {
    throw unprocessable('publishAt', 'can only be given when scheduling');
  }
  const retime = status === 'scheduled' && requested.publishAt !== undefined && requested.publishAt !== null;
  if (status === current.status && !retime) return undefined;
  if (!ALLOWED[current.status].includes(status)) {
    throw conflict('status', `cannot change from ${current.status} to ${status}`);
  }
  if (status === 'scheduled') {
    const publishAt = scheduledTime(requested.publishAt, now);
    return publishAt === current.publish_at ? undefined : { status, publish_at: publishAt, published_at: current.published_at };
  }
  return { status, publish_at: null, published_at: status === 'published' ? (current.published_at ?? now) : current.published_at };
}

/**
 * The stored state as readers see it at `now`: a scheduled article whose time has come is published. `stored` itself
 * when they agree, so that a caller can tell a due publication by identity.
 */
export function currentState(stored: StoredState, now: number): StoredState {
  if (stored.status === 'scheduled' && stored.publish_at !== null && stored.publish_at <= now) {
    return { status: 'published', publish_at: null, published_at: stored.published_at ?? stored.publish_at };
  }
  return stored;
}

/** Whether readers other than the author see an article in this state (not withheld). */
export const isListed = (state: StoredState) => state.status === 'published';
