import { Type } from 'typebox';
import { NullableString, Timestamp, UrlInteger, Wrapped } from '../../schemas.js';
import { Paging, SlugParams } from '../articles/schemas.js';

/** Revisions kept per article: the write that keeps one more drops the oldest. */
export const REVISIONS_KEPT = 100;

export const RevisionsQuery = Type.Object(Paging);

export const RevisionParams = Type.Object({
  slug: SlugParams.properties.slug,
  // BIGINT on PostgreSQL (migration 0014); past MAX_SAFE_INTEGER a JSON number is no longer exact.
  id: UrlInteger({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
});

const summaryFields = {
  id: Type.Integer(),
  title: Type.String(),
  description: Type.String(),
  tagList: Type.Array(Type.String()),
  createdAt: Timestamp,
};

export const RevisionListResponse = Type.Object({
  revisions: Type.Array(Type.Object(summaryFields), { description: 'Newest first' }),
  revisionsCount: Type.Integer({ description: `Revisions kept in all: at most ${REVISIONS_KEPT}, the oldest dropped first` }),
  nextCursor: NullableString({ description: 'Pass as `cursor` for the next page; null on the last page' }),
});

export const RevisionResponse = Wrapped('revision', Type.Object({ ...summaryFields, body: Type.String() }));
