import { describe, expect, it } from 'vitest';
import { createBodyRenderer, RENDER_BUDGET, TABLE_CELL_BUDGET } from '../src/modules/feeds/render.js';

/** The longest body the API accepts. */
const MAX_BODY = 100_000;

/** `head`, then `unit` as many times as fits in the longest body. */
const filled = (head: string, unit: string) => head + unit.repeat(Math.floor((MAX_BODY - head.length) / unit.length));
const header = (columns: number) => `|${'h|'.repeat(columns)}\n|${'-|'.repeat(columns)}\n`;
const row = (cells: string[]) => `|${cells.join('|')}|\n`;

const cellsIn = (html: string) => (html.match(/<t[dh][\s>]/g) ?? []).length;

/** A budget no body reaches, for what is bounded apart from it. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

describe('feed bodies: tables are bounded by the cells they make, not by their characters', () => {
  let version = 0;
  const render = (body: string) => createBodyRenderer('https://app.example.com')({ id: 1, updated_at: ++version, body }, UNBOUNDED)!.html;

  it('renders an ordinary table whole', () => {
    const rows = Array.from({ length: 20 }, (_, n) => row([`r${n}`, `**${n}**`, '[x](https://x.io)']));
    const html = render(`Before\n\n${header(3)}${rows.join('')}\nAfter`);
    expect(cellsIn(html)).toBe(3 + 20 * 3);
    expect(html).toContain('<tr>\n<td>r19</td>\n<td><strong>19</strong></td>\n<td><a href="https://x.io/">x</a></td>\n</tr>');
    expect(html).toMatch(/^<p>Before<\/p>\n<table>/);
    expect(html).toContain('<p>After</p>');
  });

  it('renders a table of the whole budget, and the next one as the text it was written as', () => {
    const columns = 8;
    const rowsInBudget = TABLE_CELL_BUDGET / columns - 1;
    const full = header(columns) + row(Array(columns).fill('c')).repeat(rowsInBudget);
    const html = render(`${full}\n${header(2)}${row(['late', 'table'])}`);
    expect(cellsIn(html)).toBe(TABLE_CELL_BUDGET);
    expect(html).toContain('<p>|h|h|\n|-|-|\n|late|table|</p>');
  });

  it.each([
    ['one table of full rows', filled(header(5), row(['1', '2', '3', '4', '5']))],
    ['one table whose rows markdown-it fills out to the header', filled(header(1000), '|\n')],
    ['one table of empty cells', filled(header(20), row(Array(20).fill('')))],
    ['many tables filled out to their headers', filled('', `${header(100)}${'|\n'.repeat(650)}\n`)],
  ])('renders at most the budget of cells from the worst 100,000 characters: %s', (_name, body) => {
    expect(body.length).toBeLessThanOrEqual(MAX_BODY);
    expect(body.length).toBeGreaterThan(MAX_BODY - 2000);
    const html = render(body);
    expect(cellsIn(html)).toBeLessThanOrEqual(TABLE_CELL_BUDGET);
    // What is not a table is still there, as text.
    expect(html).toContain('|h|h|');
  });
});

/** One section of an ordinary article, with what articles have: headings, emphasis, links, lists, code, quotes. */
const section = (heading: string) =>
  [
    `## ${heading}`,
    '',
    'For two years the frontend and the API lived in **separate repositories**, and every change to the types meant a',
    'pull request in each. This part explains what we tried, [what broke](https://example.com/broke) and what we would',
    'do again; the *short* version is in [the checklist](#checklist), and `npm` workspaces did most of it.',
    '',
    '- Type definitions copied by hand between `api/` and `web/`.',
    '- Three pipelines, each with its own cache, and a *full* rebuild for every shared change.',
    '- Releases ordered by hand: the API, then the client, then [the docs](https://example.com/docs).',
    '',
    '> A monorepo does not make coupling go away. It makes it visible, which is the first step to paying for it.',
    '',
    '```json',
    '{ "workspaces": ["packages/*", "apps/*"], "scripts": { "build": "tsc -b", "test": "vitest run" } }',
    '```',
    '',
    'Then project references do the ordering, so `tsc -b` builds the types first. See the',
    '[handbook](https://www.typescriptlang.org/docs/) or mail team@example.com.',
    '',
    '1. Move the code.',
    '2. Replace the copied types.',
    '3. Merge the pipelines.',
    '',
    '',
  ].join('\n');

/** 100,000 characters of paragraphs of prose, with some emphasis and a link now and then. */
const PROSE = filled(
  '',
  `${'The quick brown fox jumps over the lazy dog while a writer describes *emphasis* in ordinary sentences. '.repeat(2)}And [a link](https://example.com/page) now and then.\n\n`,
);
const paragraphsIn = (html: string) => (html.match(/<p>/g) ?? []).length;

/** An article of about 4,000 characters. */
const ordinaryArticle = (n: number) => [1, 2, 3, 4].map((part) => section(`Article ${n}, part ${part}`)).join('');

describe('feed bodies: rendering is bounded by the work it does, not by characters', () => {
  const renderer = () => createBodyRenderer('https://app.example.com');
  let version = 0;
  const costOf = (body: string) => renderer()({ id: 1, updated_at: ++version, body }, UNBOUNDED)!.cost;

  it.each([
    ['one-letter list items', '- a\n'],
    ['emphasis', '*a* '],
    ['nested lists', '- a\n  - b\n    - c\n'],
    ['nested quotes', '> > > a\n\n'],
    ['links', '[a](http://x) '],
    ['addresses linkify finds', 'a@x.io '],
    ['code spans', '`a` '],
    ['headings', '# a\n'],
    ['empty list items', '-\n'],
    ['opening brackets (which make no token)', '['],
    ['images never closed', '!['],
  ])('does not render 100,000 characters of %s, though it would as many of prose', (_name, unit) => {
    const render = renderer();
    const body = filled('', unit);
    expect(render({ id: 1, updated_at: 1, body }, RENDER_BUDGET)).toBeUndefined();
    expect(render({ id: 2, updated_at: 1, body }, 2 * RENDER_BUDGET)).toBeUndefined();
    expect(paragraphsIn(render({ id: 3, updated_at: 1, body: PROSE }, RENDER_BUDGET)!.html)).toBe(PROSE.split('\n\n').length - 1);
  });

  it('renders twenty ordinary articles whole in one answer, and 100,000 characters of prose alone', () => {
    const render = renderer();
    const articles = Array.from({ length: 20 }, (_, n) => ordinaryArticle(n));
    expect(articles.every((body) => body.length > 4000 && body.length < 6000)).toBe(true);
    let left = RENDER_BUDGET;
    for (const [n, body] of articles.entries()) {
      const rendered = render({ id: n, updated_at: 1, body }, left);
      expect(rendered?.html).toContain(`<h2>Article ${n}, part 4</h2>`);
      expect(rendered?.html.match(/<li>Merge the pipelines.<\/li>/g)).toHaveLength(4);
      left -= rendered!.cost;
    }
    expect(paragraphsIn(render({ id: 100, updated_at: 1, body: PROSE }, RENDER_BUDGET)!.html)).toBe(PROSE.split('\n\n').length - 1);
  });

  it('charges a body what it costs whether or not it was rendered before, so an answer does not depend on what is remembered', () => {
    const render = renderer();
    const article = { id: 1, updated_at: 1, body: '- a\n'.repeat(2000) };
    const cost = costOf(article.body);
    expect(render(article, cost - 1)).toBeUndefined();
    expect(render(article, cost)).toMatchObject({ cost, html: expect.stringContaining('<li>a</li>') });
    expect(render(article, cost - 1)).toBeUndefined();
    expect(render(article, cost)?.cost).toBe(cost);
  });
});
