import { type Static, Type } from 'typebox';
import { ROLES } from '../../db/schema.js';
import { MESSAGE_KEYWORD } from '../../plugins/validation.js';
import { NullableString, RequiredText, Wrapped } from '../../schemas.js';
import { KNOWN_DEVICE_HEADER, KNOWN_DEVICE_MAX_LENGTH } from './devices.js';

export const USERNAME_MAX = 64;
export const EMAIL_MAX = 254;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

// Letters and digits of any script (with their combining marks), plus _ - and .; not dots alone, since "." and
// ".." cannot appear in a profile URL (clients and browsers resolve them away). Never a character that shows
// nothing (the Hangul fillers are letters, variation selectors marks) or one Unicode has not assigned yet.
export const USERNAME_PATTERN = '^(?!\\.+$)(?:(?![\\p{Default_Ignorable_Code_Point}\\p{Cn}])[\\p{L}\\p{M}\\p{N}_.-])+$';
export const USERNAME_RULE = 'may contain only visible letters, digits, _, - and . (and not only dots)';

export const Username = Type.String({
  minLength: 1,
  maxLength: USERNAME_MAX,
  pattern: USERNAME_PATTERN,
  [MESSAGE_KEYWORD]: USERNAME_RULE,
});
export const Email = Type.String({ minLength: 1, maxLength: EMAIL_MAX, format: 'email' });
export const Password = Type.String({ minLength: PASSWORD_MIN, maxLength: PASSWORD_MAX });
/** Empty strings are accepted and stored as null, as the contract asks. */
const Bio = NullableString({ maxLength: 1000 });
const Image = NullableString({ maxLength: 2048, pattern: '^$|^https?://\\S+$', [MESSAGE_KEYWORD]: 'must be an http(s) URL' });

export const RegisterBody = Wrapped('user', Type.Object({ username: Username, email: Email, password: Password }));
export const KnownDeviceHeaders = Type.Object({
  [KNOWN_DEVICE_HEADER]: Type.Optional(
    Type.String({
      maxLength: KNOWN_DEVICE_MAX_LENGTH,
      description:
        "The `Known-Device` value of this device's last successful login, for clients that send no cookies. One that " +
        "is expired, forged, or for another account is ignored: the login counts like anyone else's.",
    }),
  ),
});
export const LoginBody = Wrapped('user', Type.Object({ email: RequiredText(EMAIL_MAX), password: RequiredText(PASSWORD_MAX) }));
export const UpdateUserBody = Wrapped(
  'user',
  Type.Object({
    username: Type.Optional(Username),
    email: Type.Optional(Email),
    password: Type.Optional(Password),
    bio: Type.Optional(Bio),
    image: Type.Optional(Image),
  }),
);

export const User = Type.Object({
  email: Type.String(),
  token: Type.String(),
  username: Type.String(),
  bio: NullableString(),
  image: NullableString(),
  role: Type.Enum([...ROLES], { description: 'What the account may do beyond writing: `moderator` and `admin` moderate' }),
});
export const UserResponse = Wrapped('user', User);

/** The password again, so that a token alone (a device left signed in) cannot delete the account. */
export const DeleteUserBody = Wrapped('user', Type.Object({ password: RequiredText(PASSWORD_MAX) }));
export const DeletionResponse = Wrapped(
  'deletion',
  Type.Object({
    purgeAt: Type.String({
      format: 'date-time',
      description: 'When the account and everything it holds are purged, unless cancelled first',
    }),
  }),
);

export type RegisterBody = Static<typeof RegisterBody>;
export type UpdateUserBody = Static<typeof UpdateUserBody>;
