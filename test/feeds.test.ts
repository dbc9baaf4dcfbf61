import { parseFeed } from 'feedsmith';
import { type DefaultTreeAdapterMap, parseFragment } from 'parse5';
import { SaxesParser } from 'saxes';
import { describe, expect, it } from 'vitest';
import { deferPerTest, describeEachDatabase, sqliteAppWith } from './support/app.js';
import { call, createArticle, registerUser, unique } from './support/client.js';

type App = Parameters<typeof call>[0];
type Node = DefaultTreeAdapterMap['childNode'] | DefaultTreeAdapterMap['documentFragment'];

const FORMATS = ['rss', 'atom', 'json'] as const;
type Format = (typeof FORMATS)[number];
const MEDIA_TYPES: Record<Format, string> = {
  rss: 'application/rss+xml; charset=utf-8',
  atom: 'application/atom+xml; charset=utf-8',
  json: 'application/feed+json; charset=utf-8',
};

const FRONTEND = 'https://app.example.com/blog';
const SETTINGS = { FRONTEND_URL: `${FRONTEND}/`, FRONTEND_ARTICLE_PATH: '/#/article/{slug}' };

/** What every format says of a feed, read back by a feed parser, so that the three can be compared. */
interface ParsedFeed {
  title: string;
  homeUrl: string;
  selfUrl: string;
  items: Array<{
    id: string;
    url: string;
    title: string;
    summary: string;
    html: string;
    published: number;
    author: string;
    authorUrl?: string;
    tags: string[];
  }>;
}

/** A strict XML 1.0 parser: any character XML forbids, or any markup out of place, fails the test. */
function expectWellFormed(xml: string): void {
  const parser = new SaxesParser();
  parser.on('error', (error) => {
    throw error;
  });
  parser.write(xml).close();
}

const rfc822 = (text: string | undefined) => {
  // What RSS requires (RFC 822 with a four-digit year, as every validator accepts), as Date writes it back.
  expect(new Date(text!).toUTCString()).toBe(text);
  return Date.parse(text!);
};

/** Parses a feed, checking on the way the elements the W3C validator requires of its format. */
function parsed(format: Format, body: string): ParsedFeed {
  if (format !== 'json') expectWellFormed(body);
  const result = parseFeed(body);
  expect(result.format).toBe(format);
  if (result.format === 'rss') {
    const { feed } = result;
    expect(feed.description).toEqual(expect.any(String));
    expect(feed.lastBuildDate).toEqual(expect.any(String));
    return {
      title: feed.title!,
      homeUrl: feed.link!,
      selfUrl: feed.atom!.links!.find((link) => link.rel === 'self')!.href!,
      items: (feed.items ?? []).map((item) => {
        expect(item.guid?.isPermaLink).toBe(false);
        return {
          id: item.guid!.value!,
          url: item.link!,
          title: item.title!,
          summary: item.description!,
          html: item.content!.encoded!,
          published: rfc822(item.pubDate),
          author: item.dc!.creators![0]!,
          tags: (item.categories ?? []).map((category) => category.name!),
        };
      }),
    };
  }
  if (result.format === 'atom') {
    const { feed } = result;
    const link = (links: typeof feed.links, rel: string) => links?.find((candidate) => candidate.rel === rel)?.href;
    expect(feed.id).toEqual(expect.any(String));
    expect(Date.parse(feed.updated!)).not.toBeNaN();
    expect(feed.authors?.[0]?.name).toEqual(expect.any(String));
    return {
      title: feed.title!.value!,
      homeUrl: link(feed.links, 'alternate')!,
      selfUrl: link(feed.links, 'self')!,
      items: (feed.entries ?? []).map((entry) => {
        expect(entry.content?.type).toBe('html');
        expect(Date.parse(entry.updated!)).not.toBeNaN();
        return {
          id: entry.id!,
          url: link(entry.links, 'alternate')!,
          title: entry.title!.value!,
          summary: entry.summary!.value!,
          html: entry.content!.value!,
          published: Date.parse(entry.published!),
          author: entry.authors![0]!.name!,
          authorUrl: entry.authors![0]!.uri!,
          tags: (entry.categories ?? []).map((category) => category.term!),
        };
      }),
    };
  }
  if (result.format !== 'json') throw new Error(`unexpected format ${result.format}`);
  const { feed } = result;
  expect(JSON.parse(body).version).toBe('https://jsonfeed.org/version/1.1');
  return {
    title: feed.title!,
    homeUrl: feed.home_page_url!,
    selfUrl: feed.feed_url!,
    items: (feed.items ?? []).map((item) => {
      expect(Date.parse(item.date_modified!)).not.toBeNaN();
      return {
        id: item.id!,
        url: item.url!,
        title: item.title!,
        summary: item.summary!,
        html: item.content_html!,
        published: Date.parse(item.date_published!),
        author: item.authors![0]!.name!,
        authorUrl: item.authors![0]!.url!,
        tags: item.tags ?? [],
      };
    }),
  };
}

/** Waits into the next second: HTTP dates count whole seconds, and a feed read in the second of a write has no Last-Modified. */
const nextSecond = () => new Promise((resolve) => setTimeout(resolve, 1005 - (Date.now() % 1000)));

async function feed(app: App, path: string, format: Format, headers: Record<string, string> = {}) {
  const response = await app.inject({ url: `${path}.${format}`, headers });
  expect(response.statusCode, `${path}.${format}: ${response.body.slice(0, 200)}`).toBe(200);
  expect(response.headers['content-type']).toBe(MEDIA_TYPES[format]);
  return { feed: parsed(format, response.body), headers: response.headers };
}

/** The same feed in all three formats, checked to say the same thing. */
async function allFormats(app: App, path: string): Promise<ParsedFeed> {
  const [rss, atom, json] = await Promise.all(FORMATS.map(async (format) => (await feed(app, path, format)).feed));
  const comparable = (parsedFeed: ParsedFeed) => ({
    ...parsedFeed,
    selfUrl: parsedFeed.selfUrl.replace(/\.(rss|atom|json)$/, ''),
    // RSS dates count seconds.
    items: parsedFeed.items.map(({ authorUrl: _, ...item }) => ({ ...item, published: Math.floor(item.published / 1000) })),
  });
  expect(comparable(atom!)).toEqual(comparable(rss!));
  expect(comparable(json!)).toEqual(comparable(rss!));
  expect(json!.items.map((item) => item.authorUrl)).toEqual(atom!.items.map((item) => item.authorUrl));
  return json!;
}

function elementsOf(node: Node): Array<DefaultTreeAdapterMap['element']> {
  const children = 'childNodes' in node ? node.childNodes : [];
  return children.flatMap((child) => ('tagName' in child ? [child, ...elementsOf(child)] : elementsOf(child)));
}

/** The HTML as a browser would parse it: nothing in it may run, load from an unsafe URL or style itself. */
function expectInert(html: string): void {
  const elements = elementsOf(parseFragment(html));
  for (const element of elements) {
    expect(['script', 'style', 'iframe', 'object', 'embed', 'svg', 'math', 'form', 'base', 'meta', 'link']).not.toContain(element.tagName);
    for (const { name, value } of element.attrs) {
      expect(name, `${element.tagName} ${name}`).not.toMatch(/^on|^style$|^srcdoc$|^formaction$/i);
      if (['href', 'src'].includes(name)) expect(new URL(value).protocol, value).toMatch(/^(https?|mailto):$/);
    }
  }
}

describeEachDatabase(
  'feeds',
  (ctx) => {
    const app = () => ctx().app;

    // Runs first, on the file's fresh database.
    it('serves a valid, empty site feed in every format before any article, with no Last-Modified while no write is recorded', async () => {
      for (const format of FORMATS) {
        const { feed: empty, headers } = await feed(app(), '/feeds/articles', format);
        expect(empty).toEqual({
          title: 'Conduit',
          homeUrl: `${FRONTEND}/`,
          selfUrl: `http://localhost:80/feeds/articles.${format}`,
          items: [],
        });
        expect(headers['last-modified']).toBeUndefined();
      }
    });

    it('lists the newest articles first, each with absolute links to the frontend, its author, tags and rendered body', async () => {
      const alice = await registerUser(app(), 'alice');
      const bob = await registerUser(app(), 'bob');
      const tag = unique('tag');
      const first = await createArticle(app(), alice.token, { description: 'First one', tagList: [tag, 'b-shared'] });
      const second = await createArticle(app(), bob.token, {
        body: '## Hello\n\nSee [the docs](docs/intro.md) and *this*.',
        tagList: [tag],
      });

      const site = await allFormats(app(), '/feeds/articles');
      expect(site.items.slice(0, 2).map((item) => item.title)).toEqual([second.title, first.title]);
      const [newest, older] = site.items as [ParsedFeed['items'][number], ParsedFeed['items'][number]];
      expect(newest).toMatchObject({
        url: `${FRONTEND}/#/article/${second.slug}`,
        author: bob.username,
        authorUrl: `${FRONTEND}/profile/${bob.username}`,
        tags: [tag],
        published: Date.parse(second.createdAt),
      });
      expect(newest.id).toMatch(/^tag:app\.example\.com,\d{4}-\d{2}-\d{2}:article:\d+$/);
      expect(older).toMatchObject({ summary: 'First one', tags: ['b-shared', tag], author: alice.username });
      const html = elementsOf(parseFragment(newest.html));
      expect(html.map((element) => element.tagName)).toEqual(['h2', 'p', 'a', 'em']);
      expect(html.find((element) => element.tagName === 'a')!.attrs).toEqual([
        { name: 'href', value: 'https://app.example.com/blog/docs/intro.md' },
      ]);
    });

    it("shows nothing of an author's private changes: an email or password change leaves every feed's answer as it was", async () => {
      const author = await registerUser(app(), 'private');
      await createArticle(app(), author.token);
      const paths = ['/feeds/articles', `/feeds/authors/${author.username}/articles`];
      // Past the current second, so that Last-Modified, sent only for a past second, is there to compare.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const answers = () => Promise.all(paths.map((path) => feed(app(), path, 'json')));
      const before = await answers();
      for (const user of [{ email: `moved-${author.email}` }, { password: 'another-password-0123' }]) {
        expect((await call(app(), 'PUT', '/api/user', { token: author.token, body: { user } })).status).toBe(200);
      }
      const after = await answers();
      for (const [i, path] of paths.entries()) {
        expect(after[i]!.headers.etag, path).toBe(before[i]!.headers.etag);
        expect(after[i]!.headers['last-modified'], path).toBe(before[i]!.headers['last-modified']);
      }
      expect(before[1]!.headers['last-modified']).toBeDefined();
    });

    it('renders bodies while the work budget of the answer lasts, and shows the rest by description and link', async () => {
      const author = await registerUser(app(), 'long');
      // 16,000 characters of list items each: one costs more than half the budget, as 100,000 characters of prose would.
      const long = (word: string) => `- ${word}\n`.repeat(2000);
      const older = await createArticle(app(), author.token, { description: 'Older & <longer>', body: long('older') });
      const newer = await createArticle(app(), author.token, { body: long('newer') });
      const items = (await allFormats(app(), `/feeds/authors/${author.username}/articles`)).items;
      expect(items.map((item) => item.title)).toEqual([newer.title, older.title]);
      expect(items[0]!.html).toContain('<li>newer</li>');
      expect(items[1]!.html).not.toContain('older');
      const shown = elementsOf(parseFragment(items[1]!.html));
      expect(shown.map((element) => element.tagName)).toEqual(['p', 'p', 'a']);
      expect(parseFragment(items[1]!.html).childNodes.map((node) => ('childNodes' in node ? node.childNodes : []))[0]).toMatchObject([
        { value: 'Older & <longer>' },
      ]);
      expect(shown[2]!.attrs).toEqual([{ name: 'href', value: `${FRONTEND}/#/article/${older.slug}` }]);
    });

    it('shows a body of 100,000 characters of markup by its description and link, and long prose whole', async () => {
      const author = await registerUser(app(), 'dense');
      const prose = await createArticle(app(), author.token, { body: 'Plain words, one after another. '.repeat(3000) });
      const dense = await createArticle(app(), author.token, { description: 'Emphasis', body: '*a* '.repeat(25_000) });
      const items = (await allFormats(app(), `/feeds/authors/${author.username}/articles`)).items;
      expect(items.map((item) => item.title)).toEqual([dense.title, prose.title]);
      expect(items[0]!.html).not.toContain('<em>');
      expect(elementsOf(parseFragment(items[0]!.html)).map((element) => element.tagName)).toEqual(['p', 'p', 'a']);
      expect(items[0]!.html).toContain(`${FRONTEND}/#/article/${dense.slug}`);

      // Alone in its feed, the prose (96,000 characters, as long as the dense body) is rendered.
      await call(app(), 'DELETE', `/api/articles/${dense.slug}`, { token: author.token });
      const alone = (await allFormats(app(), `/feeds/authors/${author.username}/articles`)).items;
      expect(alone[0]!.html).toMatch(/^<p>Plain words, one after another\. .* one after another\.<\/p>$/s);
    });

    it('keeps an item id when the title, and with it the slug and link, change', async () => {
      const author = await registerUser(app());
      const article = await createArticle(app(), author.token);
      const before = (await allFormats(app(), `/feeds/authors/${author.username}/articles`)).items[0]!;
      const renamed = await call(app(), 'PUT', `/api/articles/${article.slug}`, {
        token: author.token,
        body: { article: { title: unique('Another title ') } },
      });
      const after = (await allFormats(app(), `/feeds/authors/${author.username}/articles`)).items[0]!;
      expect(after.id).toBe(before.id);
      expect(after.url).toBe(`${FRONTEND}/#/article/${renamed.body.article.slug}`);
      expect(after.url).not.toBe(before.url);
    });

    it("shows only an author's articles, at most 20, newest first, under the stored spelling of the name", async () => {
      const author = await registerUser(app(), 'prolific');
      const other = await registerUser(app());
      const titles: string[] = [];
      for (let n = 0; n < 22; n++) titles.push((await createArticle(app(), author.token, { title: `${unique('Post ')} ${n}` })).title);
      await createArticle(app(), other.token);

      const own = await allFormats(app(), `/feeds/authors/${author.username.toUpperCase()}/articles`);
      expect(own.items.map((item) => item.title)).toEqual(titles.slice(2).reverse());
      expect(own.homeUrl).toBe(`${FRONTEND}/profile/${author.username}`);
      expect(own.selfUrl).toBe(`http://localhost:80/feeds/authors/${author.username}/articles.json`);
      expect(own.title).toBe(`${author.username} on Conduit`);
    });

    it('shows only the articles carrying a tag, whatever characters the tag has', async () => {
      const author = await registerUser(app());
      const tag = `${unique('t')} é/?#&`;
      const tagged = await createArticle(app(), author.token, { tagList: [tag] });
      await createArticle(app(), author.token, { tagList: [unique('other')] });

      const path = `/feeds/tags/${encodeURIComponent(tag)}/articles`;
      const byTag = await allFormats(app(), path);
      expect(byTag.items.map((item) => item.title)).toEqual([tagged.title]);
      expect(byTag.homeUrl).toBe(`${FRONTEND}/?tag=${encodeURIComponent(tag)}`);
      expect(byTag.selfUrl).toBe(`http://localhost:80${path}.json`);
    });

    it("answers the contract's 404 for an unknown author or tag, and for an unknown format", async () => {
      // A tag only a draft carries is no more known to strangers than one nobody used: the same 404.
      const drafter = await registerUser(app());
      const draftTag = unique('drafted');
      const draft = await call(app(), 'POST', '/api/articles', {
        token: drafter.token,
        body: { article: { title: unique('Draft '), description: 'd', body: 'b', tagList: [draftTag], status: 'draft' } },
      });
      expect(draft.status).toBe(201);
      for (const format of FORMATS) {
        const drafted = await call(app(), 'GET', `/feeds/tags/${draftTag}/articles.${format}`);
        expect(drafted).toMatchObject({ status: 404, body: { errors: { tag: ['not found'] } } });
        const author = await call(app(), 'GET', `/feeds/authors/${unique('nobody')}/articles.${format}`);
        expect(author).toMatchObject({ status: 404, body: { errors: { profile: ['not found'] } } });
        const tag = await call(app(), 'GET', `/feeds/tags/${unique('none')}/articles.${format}`);
        expect(tag).toMatchObject({ status: 404, body: { errors: { tag: ['not found'] } } });
      }
      expect(await call(app(), 'GET', '/feeds/articles.xml')).toMatchObject({ status: 404, body: { errors: { route: ['not found'] } } });
      expect((await call(app(), 'GET', '/feeds/tags/a%00b/articles.rss')).status).toBe(422);
    });

    it('renders OWASP XSS cheat-sheet payloads inert in every format', async () => {
      const author = await registerUser(app());
      const payloads = [
        '<a href="https://example.com/ok" onclick="alert(1)">fine link, no handler</a>',
        '<script>alert(1)</script>',
        '<img src=x onerror=alert(1)>',
        '<IMG SRC="jav&#x09;ascript:alert(1);">',
        '<IMG SRC=javascript:alert(String.fromCharCode(88,83,83))>',
        '<svg/onload=alert(1)>',
        '<svg><script>alert(1)</script></svg>',
        '<a href="javascript:alert(1)">click</a>',
        '<a href="JaVaScRiPt:alert(1)">click</a>',
        '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">click</a>',
        '<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+">',
        '<div style="background-image: url(javascript:alert(1))">x</div>',
        '<div style="width: expression(alert(1))">x</div>',
        '<iframe src="javascript:alert(1)"></iframe>',
        '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
        '<object data="javascript:alert(1)"></object>',
        '<embed src="javascript:alert(1)">',
        '<body onload=alert(1)>',
        '<form action="javascript:alert(1)"><button formaction="javascript:alert(1)">x</button></form>',
        '<base href="javascript:alert(1)//">',
        '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
        '<link rel="stylesheet" href="javascript:alert(1)">',
        '<details open ontoggle=alert(1)>',
        '<<SCRIPT>alert(1);//<</SCRIPT>',
        '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">entity</a>',
        '[markdown](javascript:alert(1)) ![image](javascript:alert(1)) <javascript:alert(1)>',
        '[spaced](java\tscript:alert(1)) [vbscript](vbscript:msgbox(1)) [data](data:text/html,<script>alert(1)</script>)',
        // Last: an unclosed <style> takes the rest of the body with it.
        '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>',
      ];
      await createArticle(app(), author.token, { body: payloads.join('\n\n') });
      for (const format of FORMATS) {
        const { feed: parsedFeed } = await feed(app(), `/feeds/authors/${author.username}/articles`, format);
        const html = parsedFeed.items[0]!.html;
        expectInert(html);
        expect(html).toContain('<a href="https://example.com/ok">fine link, no handler</a>');
      }
    });

    it('keeps hostile titles well-formed: markup and ]]> escaped, XML-forbidden characters removed, right-to-left marks kept', async () => {
      const author = await registerUser(app());
      const hostile = 'A ]]> B & C <b>bold</b> "quoted" \u0001\u0008\u000B\u000C\u001F\uFFFE stop \u200F\u202Eright-to-left\u202C';
      const expected = 'A ]]> B & C <b>bold</b> "quoted"  stop \u200F\u202Eright-to-left\u202C';
      const tag = `tag ]]> & <i>\u0002`;
      await createArticle(app(), author.token, { title: hostile, description: hostile, body: `Body ${hostile}`, tagList: [tag] });
      const item = (await allFormats(app(), `/feeds/authors/${author.username}/articles`)).items[0]!;
      expect(item.title).toBe(expected);
      expect(item.summary).toBe(expected);
      expect(item.tags).toEqual(['tag ]]> & <i>']);
      for (const forbidden of ['\u0001', '\u0008', '\u000B', '\u000C', '\u001F', '\uFFFE']) expect(item.html).not.toContain(forbidden);
      expect(item.html).toContain('\u200F\u202Eright-to-left\u202C');
      expectInert(item.html);
      // The tag's own feed, whose title carries the name too.
      for (const format of ['rss', 'atom'] as const) {
        const tagFeed = await feed(app(), `/feeds/tags/${encodeURIComponent(tag)}/articles`, format);
        expect(tagFeed.feed.title).toBe('tag ]]> & <i> on Conduit');
      }
    });

    it('sends Last-Modified as the newest recorded write, which moves forward when an article leaves the feed', async () => {
      const author = await registerUser(app());
      await createArticle(app(), author.token);
      const newest = await createArticle(app(), author.token);
      const path = `/feeds/authors/${author.username}/articles`;
      const lastEvent = async () =>
        (await app().db.selectFrom('events').select('created_at').orderBy('created_at', 'desc').limit(1).executeTakeFirstOrThrow())
          .created_at;

      await nextSecond();
      const before = await feed(app(), path, 'json');
      const modified = Date.parse(before.headers['last-modified'] as string);
      expect(before.headers['last-modified']).toBe(new Date(await lastEvent()).toUTCString());
      expect(modified).toBeGreaterThanOrEqual(Math.floor(Date.parse(newest.updatedAt) / 1000) * 1000);

      // In a later second than `modified`, as `before` was read in one: the change can show.
      expect((await call(app(), 'DELETE', `/api/articles/${newest.slug}`, { token: author.token })).status).toBe(204);
      await nextSecond();
      for (const format of FORMATS) {
        const after = await feed(app(), path, format);
        expect(after.feed.items.map((item) => item.title)).not.toContain(newest.title);
        expect(Date.parse(after.headers['last-modified'] as string)).toBeGreaterThan(modified);
        expect(after.headers['last-modified']).toBe(new Date(await lastEvent()).toUTCString());
      }
    });

    it('sends no Last-Modified in the second of a write, so that a reader revalidating by date sees a second write then', async () => {
      const author = await registerUser(app());
      const path = `/feeds/authors/${author.username}/articles`;
      // A whole second ahead for two writes and the reads between them.
      await nextSecond();
      const first = await createArticle(app(), author.token);
      const copies = await Promise.all(FORMATS.map((format) => feed(app(), path, format)));
      const second = await createArticle(app(), author.token);
      expect(Math.floor(Date.parse(second.createdAt) / 1000), 'both writes in one second').toBe(
        Math.floor(Date.parse(first.createdAt) / 1000),
      );
      for (const [index, format] of FORMATS.entries()) {
        const copy = copies[index]!;
        expect(copy.feed.items.map((item) => item.title)).toEqual([first.title]);
        // A reader that revalidates by date has one to send only when its copy came with one.
        const since = copy.headers['last-modified'];
        const revalidated = await feed(app(), path, format, since === undefined ? {} : { 'if-modified-since': String(since) });
        expect(revalidated.feed.items.map((item) => item.title)).toEqual([second.title, first.title]);
        expect(since, format).toBeUndefined();
      }
    });
  },
  SETTINGS,
);

describe('feeds and their settings', () => {
  const defer = deferPerTest();

  it('links to themselves at PUBLIC_URL when it is set, else at the address a trusted proxy forwarded', async () => {
    const configured = await sqliteAppWith(defer, { PUBLIC_URL: 'https://api.example.com/conduit/' });
    const forwarded = { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' };
    expect((await feed(configured, '/feeds/articles', 'atom', forwarded)).feed.selfUrl).toBe(
      'https://api.example.com/conduit/feeds/articles.atom',
    );

    const direct = await sqliteAppWith(defer, {});
    expect((await feed(direct, '/feeds/articles', 'rss', forwarded)).feed.selfUrl).toBe('http://localhost:80/feeds/articles.rss');

    const proxied = await sqliteAppWith(defer, { TRUST_PROXY: '1' });
    expect(
      (await feed(proxied, '/feeds/articles', 'json', { 'x-forwarded-host': 'feeds.example.org', 'x-forwarded-proto': 'https' })).feed
        .selfUrl,
    ).toBe('https://feeds.example.org/feeds/articles.json');
  });

  it('names the site after SITE_NAME and links to the default frontend pages', async () => {
    const app = await sqliteAppWith(defer, { SITE_NAME: 'My & Blog' });
    const author = await registerUser(app);
    const article = await createArticle(app, author.token);
    const { feed: site } = await feed(app, '/feeds/articles', 'rss');
    expect(site).toMatchObject({ title: 'My & Blog', homeUrl: 'http://localhost:4200/' });
    expect(site.items[0]!.url).toBe(`http://localhost:4200/article/${article.slug}`);
    expect(site.items[0]!.id).toMatch(/^tag:localhost,/);
  });

  it('sends no Last-Modified once the newest event is older than EVENT_RETENTION, since older ones may be purged', async () => {
    const app = await sqliteAppWith(defer, {});
    const author = await registerUser(app);
    await createArticle(app, author.token);
    await nextSecond();
    expect((await feed(app, '/feeds/articles', 'rss')).headers['last-modified']).toEqual(expect.any(String));
    await app.db
      .updateTable('events')
      .set({ created_at: Date.now() - 31 * 86_400_000 })
      .execute();
    const { feed: site, headers } = await feed(app, '/feeds/articles', 'rss');
    expect(site.items).toHaveLength(1);
    expect(headers['last-modified']).toBeUndefined();
  });

  it('gets the security headers, CORS and the per-address rate limit like every route', async () => {
    const app = await sqliteAppWith(defer, { RATE_LIMIT_MAX: '2', CORS_ORIGINS: 'https://app.example.com' });
    const from = { remoteAddress: '192.0.2.9', headers: { origin: 'https://app.example.com' } };
    const answers = [];
    for (const url of ['/feeds/articles.rss', '/feeds/articles.json', '/feeds/articles.atom'])
      answers.push(await app.inject({ url, ...from }));
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 429]);
    for (const answer of answers) {
      expect(answer.headers['access-control-allow-origin']).toBe('https://app.example.com');
      expect(answer.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('is documented outside /api, each format with its media type and the unknown names with the error body', async () => {
    const app = await sqliteAppWith(defer, {});
    const doc = (await app.inject({ url: '/api/openapi.json' })).json();
    for (const scope of ['/feeds/articles', '/feeds/authors/{username}/articles', '/feeds/tags/{tag}/articles']) {
      for (const format of FORMATS) {
        const operation = doc.paths[`${scope}.${format}`].get;
        expect(operation.servers).toEqual([{ url: '/', description: 'This server' }]);
        expect(Object.keys(operation.responses['200'].content)).toEqual([MEDIA_TYPES[format].split(';')[0]]);
        expect(operation.security).toEqual([]);
        if (scope !== '/feeds/articles') expect(operation.responses['404'].content['application/json'].schema).toBeDefined();
      }
    }
  });
});
