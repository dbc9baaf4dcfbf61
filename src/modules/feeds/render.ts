import MarkdownIt, { type Env, type MarkdownIt as Markdown, type StateBlock } from 'markdown-it';
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
 * Raw HTML in a body is kept (the RealWorld frontends show it), and then everything, markdown's own output included,
 * goes through the allowlist: feed readers differ in what they strip, so the feed must be safe as it is.
 */
const markdown = new MarkdownIt({ html: true, linkify: true });
budgetTables(markdown);

/** A body's markdown as HTML, before sanitizing; its tables spend at most TABLE_CELL_BUDGET cells. */
export const markdownHtml = (body: string): string => markdown.render(body, { tableCellsLeft: TABLE_CELL_BUDGET } satisfies RenderEnv);

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

/**
 * Markdown to sanitized HTML, remembered by article id and `updated_at` (which every edit moves), so that a feed
 * polled every few minutes renders each body once per version: rendering and sanitizing a 100,000-character body
 * takes milliseconds of the event loop, and a feed has twenty of them. Bounded in characters; the least recently
 * used version goes first.
 */
export function createBodyRenderer(frontendUrl: string): (article: { id: number; updated_at: number; body: string }) => string {
  const options = policy(frontendUrl);
  const rendered = new Map<string, string>();
  let cached = 0;
  return (article) => {
    const key = `${article.id}@${article.updated_at}`;
    const hit = rendered.get(key);
    if (hit !== undefined) {
      rendered.delete(key);
      rendered.set(key, hit);
      return hit;
    }
    const html = feedText(sanitizeHtml(markdownHtml(article.body), options));
    rendered.set(key, html);
    cached += html.length;
    for (const [oldKey, old] of rendered) {
      if (cached <= CACHE_CHARS) break;
      rendered.delete(oldKey);
      cached -= old.length;
    }
    return html;
  };
}
