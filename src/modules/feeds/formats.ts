import type { Static } from 'typebox';
import { toIso } from '../../iso-time.js';
import { escapeMarkup } from '../../markup.js';
import type { JsonFeed } from './schemas.js';

/** One article as every format shows it; texts already free of what XML forbids (render.ts `feedText`). */
export interface FeedEntry {
  /** Permanent: a tag: URI made of the article's row id, so a new title (and slug) is not a new item. */
  id: string;
  url: string;
  title: string;
  summary: string;
  html: string;
  published: number;
  updated: number;
  author: { name: string; url: string; avatar: string | null };
  tags: string[];
}

export interface FeedDocument {
  id: string;
  title: string;
  description: string;
  /** The frontend page showing the same articles. */
  homeUrl: string;
  /** This feed's own URL, in this format. */
  selfUrl: string;
  /** The newest change among the entries and the names they show: part of the body, so never the time of the request. */
  updated: number;
  /** Who the feed is by when an entry names nobody (Atom requires one): the author of an author's feed, else the site. */
  author: string;
  entries: FeedEntry[];
}

type Attributes = Record<string, string>;

const attributes = (attrs: Attributes) =>
  Object.entries(attrs)
    .map(([name, value]) => ` ${name}="${escapeMarkup(value)}"`)
    .join('');

/** `<name attrs>text</name>`, or `<name attrs/>` without text. */
const element = (name: string, text?: string, attrs: Attributes = {}) =>
  text === undefined ? `<${name}${attributes(attrs)}/>` : `<${name}${attributes(attrs)}>${escapeMarkup(text)}</${name}>`;

/** `<name>` around elements already written. */
const parent = (name: string, children: string[], attrs: Attributes = {}) =>
  `<${name}${attributes(attrs)}>\n${children.join('\n')}\n</${name}>`;

const XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>';

/** RFC 822 dates, as RSS wants them (`Tue, 05 Nov 2024 10:00:00 GMT`). */
const rfc822 = (epochMs: number) => new Date(epochMs).toUTCString();
const rfc3339 = toIso;

export function toRss(feed: FeedDocument): string {
  const items = feed.entries.map((entry) =>
    parent('item', [
      element('title', entry.title),
      element('link', entry.url),
      element('guid', entry.id, { isPermaLink: 'false' }),
      element('pubDate', rfc822(entry.published)),
      // RSS's own <author> must be an email address, which the API never shows.
      element('dc:creator', entry.author.name),
      ...entry.tags.map((tag) => element('category', tag)),
      element('description', entry.summary),
      element('content:encoded', entry.html),
    ]),
  );
  const channel = parent('channel', [
    element('title', feed.title),
    element('link', feed.homeUrl),
    element('description', feed.description),
    element('atom:link', undefined, { href: feed.selfUrl, rel: 'self', type: 'application/rss+xml' }),
    element('lastBuildDate', rfc822(feed.updated)),
    ...items,
  ]);
  const namespaces = {
    version: '2.0',
    'xmlns:atom': 'http://www.w3.org/2005/Atom',
    'xmlns:content': 'http://purl.org/rss/1.0/modules/content/',
    'xmlns:dc': 'http://purl.org/dc/elements/1.1/',
  };
  return `${XML_DECLARATION}\n${parent('rss', [channel], namespaces)}\n`;
}

export function toAtom(feed: FeedDocument): string {
  const entries = feed.entries.map((entry) =>
    parent('entry', [
      element('id', entry.id),
      element('title', entry.title, { type: 'text' }),
      element('link', undefined, { rel: 'alternate', type: 'text/html', href: entry.url }),
      element('published', rfc3339(entry.published)),
      element('updated', rfc3339(entry.updated)),
      parent('author', [element('name', entry.author.name), element('uri', entry.author.url)]),
      ...entry.tags.map((tag) => element('category', undefined, { term: tag })),
      element('summary', entry.summary, { type: 'text' }),
      element('content', entry.html, { type: 'html' }),
    ]),
  );
  const children = [
    element('id', feed.id),
    element('title', feed.title, { type: 'text' }),
    element('subtitle', feed.description, { type: 'text' }),
    element('updated', rfc3339(feed.updated)),
    element('link', undefined, { rel: 'alternate', type: 'text/html', href: feed.homeUrl }),
    element('link', undefined, { rel: 'self', type: 'application/atom+xml', href: feed.selfUrl }),
    parent('author', [element('name', feed.author)]),
    ...entries,
  ];
  return `${XML_DECLARATION}\n${parent('feed', children, { xmlns: 'http://www.w3.org/2005/Atom' })}\n`;
}

export function toJsonFeed(feed: FeedDocument): Static<typeof JsonFeed> {
  return {
    version: 'https://jsonfeed.org/version/1.1',
    title: feed.title,
    home_page_url: feed.homeUrl,
    feed_url: feed.selfUrl,
    description: feed.description,
    authors: [{ name: feed.author }],
    items: feed.entries.map((entry) => ({
      id: entry.id,
      url: entry.url,
      title: entry.title,
      summary: entry.summary,
      content_html: entry.html,
      date_published: rfc3339(entry.published),
      date_modified: rfc3339(entry.updated),
      authors: [{ name: entry.author.name, url: entry.author.url, ...(entry.author.avatar !== null && { avatar: entry.author.avatar }) }],
      tags: entry.tags,
    })),
  };
}
