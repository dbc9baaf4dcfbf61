import { type TSchema, Type } from 'typebox';
import { NullableString, Timestamp } from '../../schemas.js';
import { NOTIFICATION_KINDS } from '../events/catalogue.js';
import { Profile } from '../profiles/schemas.js';

/** Counting stops here, so that a user who never reads costs no more than one who does. */
export const UNREAD_CAP = 1000;

export const MarkReadBody = Type.Object({
  upTo: Type.Optional(
    // Notification ids are BIGINT on PostgreSQL; JSON numbers stay exact up to MAX_SAFE_INTEGER.
    Type.Integer({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'Marks this notification and every older one read; leave it out to mark everything there is now',
    }),
  ),
});

const orNull = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

const UnreadCount = Type.Integer({
  minimum: 0,
  maximum: UNREAD_CAP,
  description: `Notifications newer than the read mark, counted up to ${UNREAD_CAP}: a client shows ${UNREAD_CAP} as "${UNREAD_CAP}+"`,
});

export const Notification = Type.Object({
  id: Type.Integer(),
  kind: Type.Enum([...NOTIFICATION_KINDS]),
  createdAt: Timestamp,
  read: Type.Boolean(),
  actor: Profile,
  article: orNull(Type.Object({ slug: Type.String(), title: Type.String() })),
  comment: orNull(Type.Object({ id: Type.Integer(), body: Type.String() })),
  webhook: orNull(Type.Object({ id: Type.Integer(), url: Type.String() })),
  moderation: orNull(
    Type.Object(
      { decision: Type.Integer(), action: Type.String(), reason: NullableString(), until: NullableString({ format: 'date-time' }) },
      { description: 'A decision about you or your content (kind `moderation`): see GET /api/user/moderation, where it can be appealed' },
    ),
  ),
});

export const NotificationListResponse = Type.Object({
  notifications: Type.Array(Notification, { description: 'Newest first' }),
  unreadCount: UnreadCount,
  nextCursor: NullableString({ description: 'Where the next page starts; null on the last page' }),
});

export const UnreadCountResponse = Type.Object({ unreadCount: UnreadCount });
