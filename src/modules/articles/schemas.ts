import { type Static, Type } from 'typebox';
import { Defaulted, RequiredText, Timestamp, UrlInteger, UrlText, Wrapped } from '../../schemas.js';
import { Profile } from '../profiles/schemas.js';

export const TITLE_MAX = 256;
export const DESCRIPTION_MAX = 1024;
export const BODY_MAX = 100_000;
export const TAGS_MAX = 20;
export const TAG_MAX = 64;
export const PAGE_SIZE_MAX = 100;

const TagList = Type.Array(RequiredText(TAG_MAX), {
  maxItems: TAGS_MAX,
  description: 'Trimmed; duplicates collapse; returned sorted',
});

export const NewArticleBody = Wrapped(
  'article',
  Type.Object({
    title: RequiredText(TITLE_MAX),
    description: RequiredText(DESCRIPTION_MAX),
    body: RequiredText(BODY_MAX),
    tagList: Type.Optional(TagList),
  }),
);

export const UpdateArticleBody = Wrapped(
  'article',
  Type.Object({
    title: Type.Optional(RequiredText(TITLE_MAX)),
    description: Type.Optional(RequiredText(DESCRIPTION_MAX)),
    body: Type.Optional(RequiredText(BODY_MAX)),
    tagList: Type.Optional(TagList),
  }),
);

export const SlugParams = Type.Object({ slug: UrlText({ minLength: 1, maxLength: 512 }) });

const Paging = {
  limit: Defaulted(UrlInteger({ minimum: 1, maximum: PAGE_SIZE_MAX, default: 20 })),
  offset: Defaulted(UrlInteger({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 })),
};
// An empty filter (`?tag=`), as some clients send, means no filter.
const Filter = Type.Optional(UrlText({ maxLength: 256 }));

export const ListQuery = Type.Object({ tag: Filter, author: Filter, favorited: Filter, ...Paging });
export const FeedQuery = Type.Object(Paging);

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
};

export const ArticleSummary = Type.Object(summaryFields);
export const Article = Type.Object({ ...summaryFields, body: Type.String() });
export const ArticleResponse = Wrapped('article', Article);
export const ArticleListResponse = Type.Object({ articles: Type.Array(ArticleSummary), articlesCount: Type.Integer() });

export type NewArticle = Static<typeof NewArticleBody>['article'];
export type ArticleChanges = Static<typeof UpdateArticleBody>['article'];
export type ListQuery = Static<typeof ListQuery>;
