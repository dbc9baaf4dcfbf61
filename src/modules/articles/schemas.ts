import { type Static, type TSchema, Type } from 'typebox';
import { MESSAGE_KEYWORD } from '../../plugins/validation.js';
import {
  Defaulted,
  ModerationState,
  NullableString,
  PAGE_SIZE_MAX,
  RequiredText,
  Timestamp,
  UrlInteger,
  UrlText,
  Wrapped,
} from '../../schemas.js';
import { Profile } from '../profiles/schemas.js';
import { SEARCH_CANDIDATES, SEARCH_TEXT_MAX } from './search.js';

export const TITLE_MAX = 256;
export const DESCRIPTION_MAX = 1024;
export const BODY_MAX = 100_000;
export const TAGS_MAX = 20;
export const TAG_MAX = 64;

const TagList = Type.Array(RequiredText(TAG_MAX), {
  maxItems: TAGS_MAX,
  description: 'Trimmed; duplicates collapse; returned sorted',
});

/** Instants clients send: an ISO 8601 date-time with its offset (`Z` or ±hh:mm), as `toISOString()` writes them. */
export const Instant = Type.String({
  pattern: String.raw`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$`,
  maxLength: 40,
  [MESSAGE_KEYWORD]: 'must be an ISO 8601 time with its offset, e.g. 2030-01-31T09:00:00.000Z',
});

const Draft = Type.Literal('draft');
const Scheduled = Type.Literal('scheduled');
const Published = Type.Literal('published');
const Unpublished = Type.Literal('unpublished');

const lifecycleFields = <T extends TSchema>(status: T) => ({
  status: Type.Optional(status),
  publishAt: Type.Optional(
    Type.Union([Instant, Type.Null()], {
      description: 'When a scheduled article becomes public: in the future, at most a year ahead; alone, it means `scheduled`',
    }),
  ),
});

export const NewArticleBody = Wrapped(
  'article',
  Type.Object({
    title: RequiredText(TITLE_MAX),
    description: RequiredText(DESCRIPTION_MAX),
    body: RequiredText(BODY_MAX),
    tagList: Type.Optional(TagList),
    ...lifecycleFields(
      Type.Union([Draft, Scheduled, Published], { description: 'Without it (and without `publishAt`), published at once' }),
    ),
  }),
);

export const UpdateArticleBody = Wrapped(
  'article',
  Type.Object({
    title: Type.Optional(RequiredText(TITLE_MAX)),
    description: Type.Optional(RequiredText(DESCRIPTION_MAX)),
    body: Type.Optional(RequiredText(BODY_MAX)),
    tagList: Type.Optional(TagList),
    ...lifecycleFields(
      Type.Union([Draft, Scheduled, Published, Unpublished], {
        description: 'A transition (docs/LIFECYCLE.md); one the current state does not allow answers 409',
      }),
    ),
  }),
);

export const SlugParams = Type.Object({ slug: UrlText({ minLength: 1, maxLength: 512 }) });

export const Paging = {
  limit: Defaulted(UrlInteger({ minimum: 1, maximum: PAGE_SIZE_MAX, default: 20 })),
  offset: Defaulted(UrlInteger({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 })),
  cursor: Type.Optional(
    UrlText({
      minLength: 1,
      maxLength: 200,
      description: 'The `nextCursor` of the previous page: continues after it, at the cost of a first page (instead of `offset`)',
    }),
  ),
};
// An empty filter (`?tag=`), as some clients send, means no filter.
const Filter = Type.Optional(UrlText({ maxLength: 256 }));

const SearchText = Type.Optional(
  UrlText({
    maxLength: SEARCH_TEXT_MAX,
    description:
      'Full-text search over title, description, body and tags, best matches first: all words must match; `"exact words"`, `-word` to exclude; the last word matches as a prefix unless followed by a space',
  }),
);

export const ListQuery = Type.Object({ tag: Filter, author: Filter, favorited: Filter, q: SearchText, ...Paging });
export const FeedQuery = Type.Object(Paging);
export const OwnArticlesQuery = Type.Object({
  status: Type.Optional(
    Type.Union([Draft, Scheduled, Published, Unpublished], { description: 'Only articles in this state; all of them without it' }),
  ),
  ...Paging,
});

const summaryFields = {
  slug: Type.String(),
  title: Type.String(),
  description: Type.String(),
  tagList: Type.Array(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  favorited: Type.Boolean(),
  favoritesCount: Type.Integer(),
  author: Profile,
  status: Type.Union([Draft, Scheduled, Published, Unpublished], {
    description: 'Only the author ever sees an article that is not `published`',
  }),
  publishAt: NullableString({ format: 'date-time', description: 'While `scheduled`: when it becomes public' }),
  publishedAt: NullableString({ format: 'date-time', description: 'When it first became public; never changes once set' }),
  moderation: ModerationState,
};

export const ArticleSummary = Type.Object(summaryFields);
export const Article = Type.Object({ ...summaryFields, body: Type.String() });
export const ArticleResponse = Wrapped('article', Article);
const listFields = <T extends TSchema>(items: T) => ({
  articles: Type.Array(items),
  articlesCount: Type.Integer({ description: `Matches in all; a search counts at most the ${SEARCH_CANDIDATES} it ranks` }),
  nextCursor: NullableString({ description: 'Pass as `cursor` for the next page; null on the last page' }),
});

const SearchResult = Type.Object({
  ...summaryFields,
  snippet: Type.Optional(
    Type.String({ description: 'Searches only: where the body matches, as HTML-escaped text with matched words in <mark>' }),
  ),
});
export const ArticleListResponse = Type.Object({
  ...listFields(SearchResult),
  partial: Type.Optional(
    Type.Literal(true, {
      description:
        'Present only when a search (on PostgreSQL) ran out of time looking for older matches past the newest articles: ' +
        'some may be missing from the ranking and from `articlesCount`',
    }),
  ),
});
export const FeedResponse = Type.Object(listFields(ArticleSummary));

export type NewArticle = Static<typeof NewArticleBody>['article'];
export type ArticleChanges = Static<typeof UpdateArticleBody>['article'];
export type ListQuery = Static<typeof ListQuery>;
