import { type TSchema, type TSchemaOptions, Type } from 'typebox';
import { NullableString, Timestamp } from '../../schemas.js';
import { Article } from '../articles/schemas.js';
import { Notification } from '../notifications/schemas.js';
import { Decision, FiledReport } from '../reports/schemas.js';
import { Webhook } from '../webhooks/schemas.js';

export const EXPORT_VERSION = 1;

const orNull = <T extends TSchema>(schema: T, options?: TSchemaOptions) => Type.Union([schema, Type.Null()], options);

export const ExportedUser = Type.Object({
  email: Type.String(),
  username: Type.String(),
  bio: NullableString(),
  image: NullableString(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const Revision = Type.Object({
  id: Type.Integer(),
  title: Type.String(),
  description: Type.String(),
  body: Type.String(),
  tagList: Type.Array(Type.String()),
  createdAt: Timestamp,
});

const Relation = Type.Object({ username: Type.String(), since: Timestamp });

export const ExportResponse = Type.Object({
  export: Type.Object({
    version: Type.Literal(EXPORT_VERSION, { description: 'Of this document: grows only by adding keys' }),
    exportedAt: Timestamp,
    user: ExportedUser,
    articles: Type.Array(Type.Object({ ...Article.properties, revisions: Type.Array(Revision, { description: 'Oldest first' }) }), {
      description: 'Every article of yours in every state, as you see it, oldest first',
    }),
    comments: Type.Array(
      Type.Object({
        id: Type.Integer(),
        body: Type.String(),
        createdAt: Timestamp,
        updatedAt: Timestamp,
        article: orNull(Type.Object({ slug: Type.String(), title: Type.String() }), {
          description: 'null when the article is no longer public (its author unpublished it)',
        }),
      }),
      { description: 'Every comment you wrote, oldest first' },
    ),
    favorites: Type.Array(Type.Object({ slug: Type.String(), title: Type.String(), favoritedAt: Timestamp }), {
      description: 'The articles you favorited that you can still see',
    }),
    following: Type.Array(Relation, { description: 'Whom you follow, since when' }),
    followers: Type.Array(Relation, { description: 'Who follows you, since when' }),
    notifications: Type.Array(Notification, { description: 'Newest first, as GET /notifications shows them' }),
    webhooks: Type.Array(Webhook, { description: 'Your endpoints; never their secrets' }),
    reports: Type.Array(FiledReport, { description: 'The reports and appeals you filed, oldest first' }),
    moderation: Type.Array(Decision, { description: 'The moderation decisions about you, oldest first' }),
  }),
});

export const EXPORT_DESCRIPTION =
  'Everything the account holds, as one JSON document sent as a download (`Content-Disposition: attachment`), ' +
  'written as it is read, so that an account of any size costs the server the same memory. One export per account ' +
  'every 10 minutes: another within that time is 429 with `Retry-After`. A client that stops reading is cut off ' +
  'after `CONNECTION_TIMEOUT`; an answer cut short is not valid JSON, so a partial download never passes for a ' +
  'complete one. Never cached.';
