import { Type } from '@sinclair/typebox';
import { RequiredText, Timestamp, Wrapped } from '../../schemas.js';
import { Profile } from '../profiles/schemas.js';

export const COMMENT_MAX = 10_000;

export const NewCommentBody = Wrapped('comment', Type.Object({ body: RequiredText(COMMENT_MAX) }));

export const CommentParams = Type.Object({
  slug: Type.String({ minLength: 1, maxLength: 512 }),
  // Bounded by the id column's range so that no database sees an out-of-range number.
  id: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }),
});

export const Comment = Type.Object({
  id: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  body: Type.String(),
  author: Profile,
});
export const CommentResponse = Wrapped('comment', Comment);
export const CommentListResponse = Type.Object({ comments: Type.Array(Comment) });
