import MarkdownIt, { type Env, type MarkdownIt as Markdown, type StateBlock, type Token } from 'markdown-it';
import sanitizeHtml from 'sanitize-html';

/**
 * Characters XML 1.0 forbids in a document (C0 controls but tab and line breaks, U+FFFE, U+FFFF, unpaired
 * surrogates): one of them makes the whole feed unreadable to a strict parser, so they are dropped from every text a
 * feed carries. Everything else stays, right-to-left marks and overrides included: they are legal, and a title in
 * Arabic or Hebrew may need them.
 */
const XML_FORBIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching those characters is the point.
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

export const feedText = (text: string): string => text.replace(XML_FORBIDDEN, '');

/**
 * Table cells one body renders as tables. A table costs per cell, not per character: markdown-it fills every row
 * out to the header's width (up to 65,536 cells a table), so a 100,000-character body of tables made millions of
 * cells. A table that would take the body past this many is shown as the text it was written as, and so is every
 * table after it. A table of 400 rows by 10 columns fits.
 */
export const TABLE_CELL_BUDGET = 4096;

interface RenderEnv extends Env {
  tableCellsLeft: number;
}

const isBlank = (state: StateBlock, line: number) => state.bMarks[line]! + state.tShift[line]! >= state.eMarks[line]!;

/**
 * Whether the table starting at `startLine` fits in `cells`, judged before it is parsed: its delimiter row bounds
 * its width, and its rows end at the first blank line at the latest. The scan stops once the table is too big, so it
 * reads at most `cells` lines.
 */
function tableFits(state: StateBlock, startLine: number, endLine: number, cells: number): boolean {
  const delimiterRow = state.src.slice(state.bMarks[startLine + 1]!, state.eMarks[startLine + 1]!);
  const width = delimiterRow.split('|').filter((column) => column.trim() !== '').length;
  // The header's row, then the body's.
  let rows = 1;
  for (let line = startLine + 2; line < endLine && !isBlank(state, line); line++) {
    rows++;
    if (rows * width > cells) return false;
  }
  return rows * width <= cells;
}

/**
 * Wraps markdown-it's table rule so that the tables of one body spend at most `env.tableCellsLeft` cells. Asked only
 * whether a table starts there (`silent`, as when it may end a paragraph), it answers as before until the budget is
 * spent; the first table that does not fit spends the rest, so its text is not measured again line by line.
 */
function budgetTables(md: Markdown): void {
  const table = md.block.ruler.__rules__.find((rule) => rule.name === 'table')!;
  const parseTable = table.fn;
  md.block.ruler.at(
    'table',
    (state, startLine, endLine, silent) => {
      const env = state.env as RenderEnv;
      if (env.tableCellsLeft <= 0) return false;
      if (silent) return parseTable(state, startLine, endLine, silent);
      if (!parseTable(state, startLine, endLine, true)) return false;
      if (!tableFits(state, startLine, endLine, env.tableCellsLeft)) {
        env.tableCellsLeft = 0;
        return false;
      }
      const first = state.tokens.length;
      const parsed = parseTable(state, startLine, endLine, false);
      for (let index = first; index < state.tokens.length; index++) {
        const { type } = state.tokens[index]!;
        if (type === 'td_open' || type === 'th_open') env.tableCellsLeft--;
      }
      return parsed;
    },
    { alt: table.alt },
  );
}

/**
 * What rendering a body costs, in units of one character of markdown. The work a body does depends on what its
 * characters make, not on how many there are (100,000 characters of one-letter list items took 8-10 times as long as
 * prose, of `![` 25 times), so the parser's steps, its skips, the tokens it makes, the links it resolves and the
 * markup the sanitizer then reads are counted too, as they happen. A step is one try of the parser's rules at one
 * place (a block, a line of a paragraph, quote or list, or a position in a line): a body of `[` takes 200,000 while
 * making no token. A skip is one token passed over while looking for the end of a link's text, up to 100 levels deep
 * for `[[[` (remembered per place, but each one is a call): a body of `[` makes 10 million. The sanitizer parses
 * each tag and character reference in JavaScript. The weights come from timing bodies made of each kind of markdown
 * (docs/FEEDS.md).
 */
export const RENDER_COST = { character: 1, step: 16, skip: 1, token: 8, link: 128, markup: 32 } as const;

/**
 * Work one feed answer spends on rendering bodies, in RENDER_COST units: a little more than 100,000 characters of
 * prose cost (360,000-440,000), so that the costliest answer takes about as long as those do. Twenty articles of a
 * few thousand characters of ordinary markdown fit.
 */
export const RENDER_BUDGET = 500_000;

/** Thrown by the meter once a body has spent what it was given; the parse stops where it is. */
const OVER_BUDGET = new Error('over the render budget');

/**
 * What the body being rendered may still spend. Markdown-it parses synchronously and calls the hooks below without
 * the body's env (a link is resolved with nothing but its URL), so the one meter lives here for the length of a render.
 */
let unitsLeft = 0;

function spend(units: number): void {
  unitsLeft -= units;
  if (unitsLeft < 0) throw OVER_BUDGET;
}

/** Parser states whose every token is paid for as it is made, whichever rule makes it. */
// biome-ignore lint/suspicious/noExplicitAny: TypeScript lets a class extend a generic base only if it takes any[].
function metered<State extends new (...args: any[]) => { push(type: string, tag: string, nesting: -1 | 0 | 1): Token }>(
  Base: State,
): State {
  return class extends Base {
    override push(type: string, tag: string, nesting: -1 | 0 | 1): Token {
      spend(RENDER_COST.token);
      return super.push(type, tag, nesting);
    }
  };
}

/**
 * Makes the parser pay for its work as it goes: a first rule in each chain that matches nothing but is tried wherever
 * the others are, skips, tokens as they are pushed, and links as they are resolved (linkify's included, whose tokens
 * are made outside the parser states).
 */
function meterWork(md: Markdown): void {
  // Also asked, line by line, whether a block ends a paragraph, a quote or a list: a paragraph of 50,000 short lines
  // is one block, but its lines are tried as many times.
  md.block.ruler.before(
    md.block.ruler.__rules__[0]!.name,
    'render_cost',
    () => {
      spend(RENDER_COST.step);
      return false;
    },
    { alt: ['paragraph', 'reference', 'blockquote', 'list'] },
  );
  md.inline.ruler.before(md.inline.ruler.__rules__[0]!.name, 'render_cost', () => {
    spend(RENDER_COST.step);
    return false;
  });
  const skipToken = md.inline.skipToken.bind(md.inline);
  md.inline.skipToken = (state) => {
    spend(RENDER_COST.skip);
    skipToken(state);
  };
  md.block.State = metered(md.block.State);
  md.inline.State = metered(md.inline.State);
  const normalizeLink = md.normalizeLink.bind(md);
  md.normalizeLink = (url) => {
    spend(RENDER_COST.link);
    return normalizeLink(url);
  };
}

/**
 * Raw HTML in a body is kept (the RealWorld frontends show it), and then everything, markdown's own output included,
 * goes through the allowlist: feed readers differ in what they strip, so the feed must be safe as it is.
 */
const markdown = new MarkdownIt({ html: true, linkify: true });
budgetTables(markdown);
meterWork(markdown);

/** Tags and character references: what the sanitizer parses one by one. */
function markupIn(html: string): number {
  let markup = 0;
  for (let at = 0; at < html.length; at++) {
    const code = html.charCodeAt(at);
    if (code === 0x3c || code === 0x26) markup++;
  }
  return markup;
}

/**
 * A body's markdown as HTML, before sanitizing, and the units it cost, the sanitizer's markup included; nothing if
 * that is more than `budget`, found out by the time the budget is spent. Its tables spend at most TABLE_CELL_BUDGET
 * cells.
 */
function markdownHtml(body: string, budget: number): { html: string; cost: number } | undefined {
  unitsLeft = budget;
  try {
    spend(RENDER_COST.character * body.length);
    const env: RenderEnv = { tableCellsLeft: TABLE_CELL_BUDGET };
    const html = markdown.renderer.render(markdown.parse(body, env), markdown.options, env);
    spend(RENDER_COST.markup * markupIn(html));
    return { html, cost: budget - unitsLeft };
  } catch (error) {
    if (error === OVER_BUDGET) return undefined;
    throw error;
  }
}

const ALLOWED_TAGS = [
  ...['p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'code', 'kbd', 'samp'],
  ...['em', 'strong', 'del', 's', 'sub', 'sup', 'abbr', 'a', 'img', 'ul', 'ol', 'li', 'dl', 'dt', 'dd'],
  ...['table', 'thead', 'tbody', 'tfoot', 'tr', 'th', 'td'],
];

/** The URL as the frontend's page would resolve it; nothing when it is not a URL at all. */
function absolute(url: string, base: string): string | undefined {
  return URL.canParse(url, base) ? new URL(url, base).href : undefined;
}

/**
 * A reader resolves a relative link against the feed's own address, this API, where no article lives: links and
 * images are made absolute against the frontend first. The parsed URL (no tabs or newlines hiding a `javascript:`)
 * is what the scheme allowlist then judges.
 */
function absolutized(attribute: string, base: string): sanitizeHtml.Transformer {
  return (tagName, attribs) => {
    const { [attribute]: url, ...rest } = attribs;
    const resolved = url === undefined ? undefined : absolute(url, base);
    return { tagName, attribs: resolved === undefined ? rest : { ...rest, [attribute]: resolved } };
  };
}

function policy(frontendUrl: string): sanitizeHtml.IOptions {
  const base = `${frontendUrl}/`;
  return {
    allowedTags: ALLOWED_TAGS,
    allowedAttributes: {
      a: ['href', 'title'],
      img: ['src', 'alt', 'title', 'width', 'height'],
      abbr: ['title'],
      ol: ['start'],
      code: ['class'],
    },
    allowedClasses: { code: [/^language-[\w-]+$/] },
    // No data: URLs, not even for images: an SVG one runs script in some readers' previews.
    allowedSchemes: ['http', 'https', 'mailto'],
    allowedSchemesByTag: { img: ['http', 'https'] },
    allowProtocolRelative: false,
    disallowedTagsMode: 'discard',
    transformTags: { a: absolutized('href', base), img: absolutized('src', base) },
  };
}

/** Characters of rendered HTML kept for reuse: a few hundred typical articles, or 80 of the longest. */
const CACHE_CHARS = 16 * 1024 * 1024;

/** A body as sanitized HTML, and what rendering it cost in RENDER_COST units. */
export interface RenderedBody {
  html: string;
  cost: number;
}

/**
 * Markdown to sanitized HTML, remembered by article id and `updated_at` (which every edit moves), so that a feed
 * polled every few minutes renders each body once per version: rendering and sanitizing a 100,000-character body
 * takes milliseconds of the event loop, and a feed has twenty of them. A body that costs more than the `budget` it
 * is given is not rendered (nothing is returned), and that is remembered too, as the least it costs, so that a body
 * too costly for any answer is given up on without being parsed again. Bounded in characters; the least recently
 * used version goes first.
 */
export function createBodyRenderer(
  frontendUrl: string,
): (article: { id: number; updated_at: number; body: string }, budget: number) => RenderedBody | undefined {
  const options = policy(frontendUrl);
  // A version's rendering, or, with no html, the least it costs: more than it was once given.
  const rendered = new Map<string, { html?: string; cost: number }>();
  let cached = 0;
  const forget = (key: string) => {
    const entry = rendered.get(key);
    if (entry === undefined) return;
    rendered.delete(key);
    cached -= key.length + (entry.html?.length ?? 0);
  };
  const remember = (key: string, entry: { html?: string; cost: number }) => {
    forget(key);
    rendered.set(key, entry);
    cached += key.length + (entry.html?.length ?? 0);
    for (const oldKey of rendered.keys()) {
      if (cached <= CACHE_CHARS) break;
      forget(oldKey);
    }
  };
  const render = (body: string, budget: number) => {
    const markup = markdownHtml(body, budget);
    return markup === undefined ? { cost: budget + 1 } : { html: feedText(sanitizeHtml(markup.html, options)), cost: markup.cost };
  };
  return (article, budget) => {
    const key = `${article.id}@${article.updated_at}`;
    const known = rendered.get(key);
    const entry = known !== undefined && (known.html !== undefined || budget < known.cost) ? known : render(article.body, budget);
    remember(key, entry);
    return entry.html !== undefined && entry.cost <= budget ? { html: entry.html, cost: entry.cost } : undefined;
  };
}
