import { Type } from 'typebox';
import { ROLES } from '../../db/schema.js';
import { INTEGER_ID_MAX, NullableString, RequiredText, Timestamp, UrlInteger, Wrapped } from '../../schemas.js';
import { Instant } from '../articles/schemas.js';

/** Long enough for a statement of reasons that cites a rule and the passage it breaks. */
export const REASON_MAX = 2_000;

export const HideBody = Wrapped(
  'moderation',
  Type.Object({ reason: RequiredText(REASON_MAX, 'Told to the author, who reads it beside the hidden content') }),
);

/** Lifting a hide or a suspension needs no reason: the body, and everything in it, may be left out. */
export const UnhideBody = Type.Object({
  moderation: Type.Optional(Type.Object({ reason: Type.Optional(RequiredText(REASON_MAX, 'Told to the author')) })),
});

/** Lets a client send no body at all where every field of it is optional (UnhideBody): read as `{}`. */
export const bodyOptional = async (request: { body: unknown }) => {
  request.body ??= {};
};

export const SuspendBody = Wrapped(
  'moderation',
  Type.Object({
    reason: RequiredText(REASON_MAX, 'Told to the account'),
    until: Type.Optional(Type.Unsafe<string>({ ...Instant, description: 'When the suspension lifts itself; without it, until lifted' })),
  }),
);

export const RoleBody = Wrapped('user', Type.Object({ role: Type.Enum([...ROLES]) }));

export const CommentIdParams = Type.Object({ id: UrlInteger({ minimum: 1, maximum: INTEGER_ID_MAX }) });

export const ModeratedUserView = Type.Object({
  username: Type.String(),
  role: Type.Enum([...ROLES]),
  suspension: Type.Union([
    Type.Object({ since: Timestamp, until: NullableString({ format: 'date-time' }), reason: NullableString() }),
    Type.Null(),
  ]),
});
export const ModeratedUserResponse = Wrapped('user', ModeratedUserView);

export const AuditLogResponse = Type.Object({
  entries: Type.Array(
    Type.Object({
      id: Type.Integer(),
      actor: Type.String({ description: 'The username; `system` for the scheduler and the purge; `#<id>` once the account is gone' }),
      action: Type.String(),
      target: Type.Object({ type: Type.String(), id: Type.Integer() }),
      reason: NullableString(),
      createdAt: Timestamp,
    }),
    { description: 'Newest first' },
  ),
  nextCursor: NullableString({ description: 'Where the next page starts; null on the last page' }),
});
