import { describe, expect, it } from 'vitest';
import { createBodyRenderer, TABLE_CELL_BUDGET } from '../src/modules/feeds/render.js';

/** The longest body the API accepts. */
const MAX_BODY = 100_000;

/** `head`, then `unit` as many times as fits in the longest body. */
const filled = (head: string, unit: string) => head + unit.repeat(Math.floor((MAX_BODY - head.length) / unit.length));
const header = (columns: number) => `|${'h|'.repeat(columns)}\n|${'-|'.repeat(columns)}\n`;
const row = (cells: string[]) => `|${cells.join('|')}|\n`;

const cellsIn = (html: string) => (html.match(/<t[dh][\s>]/g) ?? []).length;

describe('feed bodies: tables are bounded by the cells they make, not by their characters', () => {
  let version = 0;
  const render = (body: string) => createBodyRenderer('https://app.example.com')({ id: 1, updated_at: ++version, body });

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
