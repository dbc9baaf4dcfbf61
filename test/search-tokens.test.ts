import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fts5Terms } from '../src/modules/articles/fts5-tokens.js';

const LAST_CODE_POINT = 0x10ffff;
const CHUNK = 0x4000;

/** Every code point but the surrogates (no string holds one alone as text SQLite reads) and U+0000. */
function* codePoints(from: number, to: number) {
  for (let code = Math.max(from, 1); code < to; code++) if (code < 0xd800 || code > 0xdfff) yield code;
}

describe('the search terms, split as SQLite FTS5 splits them', () => {
  let database: BetterSqlite3.Database;

  beforeAll(() => {
    database = new BetterSqlite3(':memory:');
    // The tokenizer of the index (migration 0011), and a view of the terms it makes of each row, in order.
    database.exec(`create virtual table terms using fts5(text, tokenize='unicode61 remove_diacritics 2');
      create virtual table term_list using fts5vocab(terms, 'instance')`);
  });
  afterAll(() => database?.close());

  // A million and a code points through FTS5 take about fifteen seconds.
  it('splits, drops and keeps every code point as FTS5 does', { timeout: 120_000 }, () => {
    const insert = database.prepare('insert into terms (rowid, text) values (?, ?)');
    const lengths = database.prepare<[number], { term: string }>('select term from term_list where doc = ? order by offset');
    // Each code point between two letters: FTS5 makes two terms of the three when it splits there, one of two
    // letters when it drops the code point, one of three when it keeps it; it folds each code point to one.
    const length = (term: string) => [...term].length;
    let checked = 0;
    for (let from = 0; from <= LAST_CODE_POINT; from += CHUNK) {
      const units = [...codePoints(from, from + CHUNK)].map((code) => `a${String.fromCodePoint(code)}b`);
      const text = units.join(' ');
      insert.run(from + 1, text);
      const fts5 = lengths.all(from + 1).map(({ term }) => length(term));
      const ours = fts5Terms(text).map(length);
      if (ours.join() !== fts5.join()) {
        const differ = units.filter((unit) => fts5Terms(unit).map(length).join() !== fts5Of(database, unit).join());
        expect(
          differ.map((unit) => [...unit][1]!.codePointAt(0)!.toString(16)),
          'code points that differ',
        ).toEqual([]);
      }
      checked += units.length;
    }
    expect(checked).toBe(LAST_CODE_POINT - 0x800);
  });

  it('splits the words that made searches expensive', () => {
    expect(fts5Terms('a\u20dd'.repeat(100))).toHaveLength(100);
    expect(fts5Terms('x\u0903y')).toEqual(['x', 'y']);
    expect(fts5Terms('t\u0301\u0301')).toEqual(['t']);
    expect(fts5Terms('node.js Crème')).toEqual(['node', 'js', 'Crème']);
  });
});

let scratchRow = 1 << 30;
/** FTS5's term lengths for one text, through the same table. */
function fts5Of(database: BetterSqlite3.Database, text: string): number[] {
  const row = scratchRow++;
  database.prepare('insert into terms (rowid, text) values (?, ?)').run(row, text);
  return database
    .prepare<[number], { term: string }>('select term from term_list where doc = ? order by offset')
    .all(row)
    .map(({ term }) => [...term].length);
}
