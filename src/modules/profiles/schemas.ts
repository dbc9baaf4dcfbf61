import { Type } from 'typebox';
import { NullableString, UrlText, Wrapped } from '../../schemas.js';

export const Profile = Type.Object({
  username: Type.String(),
  bio: NullableString(),
  image: NullableString(),
  following: Type.Boolean(),
});

/** A profile answered on its own: to a signed-in caller, with whether they block and mute this user. */
export const ProfileResponse = Wrapped(
  'profile',
  Type.Object({
    ...Profile.properties,
    blocking: Type.Optional(Type.Boolean({ description: 'Whether the caller blocks this user; signed-in callers only' })),
    muting: Type.Optional(Type.Boolean({ description: 'Whether the caller mutes this user; signed-in callers only' })),
  }),
);

export const UsernameParams = Type.Object({ username: UrlText({ minLength: 1, maxLength: 256 }) });
