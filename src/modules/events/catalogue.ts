/**
 * Every event the outbox records. The order is part of the stored data: a webhook endpoint keeps the types it wants
 * as one bit per position here, so new types are only ever appended.
 */
export const EVENT_TYPES = [
  'user.registered',
  'user.updated',
  'profile.followed',
  'profile.unfollowed',
  'article.created',
  'article.updated',
  'article.deleted',
  'article.favorited',
  'article.unfavorited',
  'comment.created',
  'comment.deleted',
  'article.published',
  'article.unpublished',
  'user.deletion_requested',
  'user.deletion_cancelled',
  'user.deleted',
  'article.hidden',
  'article.unhidden',
  'comment.hidden',
  'comment.unhidden',
  'user.suspended',
  'user.unsuspended',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** Bumped when a `data` shape changes in a way an existing consumer could trip on; additions keep it. */
export const EVENT_SCHEMA_VERSION = 1;

export const eventBit = (type: EventType): number => 1 << EVENT_TYPES.indexOf(type);

export const eventMask = (types: readonly EventType[]): number => types.reduce((mask, type) => mask | eventBit(type), 0);

export const typesInMask = (mask: number): EventType[] => EVENT_TYPES.filter((type) => (mask & eventBit(type)) !== 0);

/**
 * What anyone may watch on the live stream, signed in or not: published content, never who follows or favorites whom.
 * An event of these types about an article that is not public at the time stays off it (NewEvent.public).
 */
const PUBLIC_TYPES: ReadonlySet<EventType> = new Set([
  'article.created',
  'article.updated',
  'article.deleted',
  'comment.created',
  'comment.deleted',
  'article.published',
  'article.unpublished',
  'article.hidden',
  'article.unhidden',
  'comment.hidden',
  'comment.unhidden',
]);

export const isPublic = (type: EventType): boolean => PUBLIC_TYPES.has(type);

/** What a notification can be about; the API's schema documents the same list. */
export const NOTIFICATION_KINDS = ['follow', 'favorite', 'comment', 'webhook-disabled', 'moderation'] as const;

export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/**
 * The events that tell the owner something happened to them or their article (the database makes the notification:
 * migration 0009's event_types, which a test keeps equal to this and to EVENT_TYPES).
 */
export const NOTIFIES: Partial<Record<EventType, NotificationKind>> = {
  'profile.followed': 'follow',
  'article.favorited': 'favorite',
  'comment.created': 'comment',
};
