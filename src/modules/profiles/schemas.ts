import { Type } from 'typebox';
import { NullableString, UrlText, Wrapped } from '../../schemas.js';

export const Profile = Type.Object({
  username: Type.String(),
  bio: NullableString(),
  image: NullableString(),
  following: Type.Boolean(),
});
export const ProfileResponse = Wrapped('profile', Profile);

export const UsernameParams = Type.Object({ username: UrlText({ minLength: 1, maxLength: 256 }) });
