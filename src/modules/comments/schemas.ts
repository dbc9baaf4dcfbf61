import { Type } from 'typebox';
import { INTEGER_ID_MAX, ModerationState, RequiredText, Timestamp, UrlInteger, Wrapped } from '../../schemas.js';
import { SlugParams } from '../articles/schemas.js';
import { Profile } from '../profiles/schemas.js';

export const COMMENT_MAX = 10_000;

export const NewCommentBody = Wrapped('comment', Type.Object({ body: RequiredText(COMMENT_MAX) }));

export const CommentParams = Type.Object({
  slug: SlugParams.properties.slug,
  // Bounded by the id column's range so that no database sees an out-of-range number.
  id: UrlInteger({ minimum: 1, maximum: INTEGER_ID_MAX }),
});

export const Comment = Type.Object({
  id: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  body: Type.String(),
  author: Profile,
  moderation: ModerationState,
});
export const CommentResponse = Wrapped('comment', Comment);
export const CommentListResponse = Type.Object({ comments: Type.Array(Comment) });
