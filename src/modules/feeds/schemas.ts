import { Type } from 'typebox';
import { UrlText } from '../../schemas.js';
import { TAG_MAX } from '../articles/schemas.js';

export const AuthorParams = Type.Object({ username: UrlText({ minLength: 1, maxLength: 256 }) });
export const TagParams = Type.Object({ tag: UrlText({ minLength: 1, maxLength: TAG_MAX }) });

const JsonFeedAuthor = Type.Object({
  name: Type.String(),
  url: Type.Optional(Type.String({ format: 'uri' })),
  avatar: Type.Optional(Type.String({ format: 'uri' })),
});

const JsonFeedItem = Type.Object({
  id: Type.String({ description: 'A tag: URI that stays the same when the title (and so the slug) changes' }),
  url: Type.String({ format: 'uri', description: "The article's page on the frontend" }),
  title: Type.String(),
  summary: Type.String({ description: "The article's description" }),
  content_html: Type.String({ description: 'The body, rendered from markdown and sanitized' }),
  date_published: Type.String({ format: 'date-time' }),
  date_modified: Type.String({ format: 'date-time' }),
  authors: Type.Array(JsonFeedAuthor),
  tags: Type.Array(Type.String()),
});

export const JsonFeed = Type.Object(
  {
    version: Type.Literal('https://jsonfeed.org/version/1.1'),
    title: Type.String(),
    home_page_url: Type.String({ format: 'uri' }),
    feed_url: Type.String({ format: 'uri' }),
    description: Type.String(),
    authors: Type.Array(JsonFeedAuthor),
    items: Type.Array(JsonFeedItem),
  },
  { description: 'A JSON Feed 1.1 document (https://jsonfeed.org/version/1.1), newest article first' },
);

/** An XML answer: the schema documents it, and Fastify sends the string as it is (only JSON is serialized). */
const xmlDocument = (mediaType: string, description: string) => ({
  description,
  content: { [mediaType]: { schema: Type.String({ description }) } },
});

export const RssResponse = xmlDocument('application/rss+xml', 'An RSS 2.0 document, newest article first');
export const AtomResponse = xmlDocument('application/atom+xml', 'An Atom 1.0 document, newest article first');
export const JsonFeedResponse = {
  description: 'A JSON Feed 1.1 document, newest article first',
  content: { 'application/feed+json': { schema: JsonFeed } },
};
