import { type RawBuilder, sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import { unprocessable } from '../../errors.js';
import { escapeMarkup } from '../../markup.js';
import { fts5Terms } from './fts5-tokens.js';

/** Longest `q` accepted: a search box's worth. 10 KB of text is the contract's 422, never a slow query. */
export const SEARCH_TEXT_MAX = 200;
/**
 * Words a search may name, exclusions and phrases included, counted as the index splits them: each is one more index
 * lookup, and one more position for a phrase to check.
 */
export const SEARCH_WORDS_MAX = 12;
/**
 * A search ranks the most recent matches, at most this many: a word in every article would otherwise rank a
 * million rows per request. Rarer words are ranked over all their matches; `articlesCount` counts these candidates.
 */
export const SEARCH_CANDIDATES = 500;
/**
 * SQLite's bm25() weighs each word by the number of articles holding it, which FTS5 counts anew for every query by
 * reading all of them: 20 ms for a word in most of a million articles, 100 ms for a phrase. A search with a clause
 * in more articles than this lists its candidates newest first instead; counting up to this bound costs about a
 * millisecond per clause.
 */
export const BM25_MATCHES_MAX = 20_000;
/**
 * A prefix shorter than this (`a*`, `qu*`) would expand to a large share of the vocabulary, and FTS5 reads every
 * completion's articles to merge them. Counted in code points of the term the index looks up, after the marks it
 * drops: `t́́` is the prefix `t`.
 */
const PREFIX_MIN = 3;

/** One part of a search: a word, or several that must follow each other (a quoted phrase, or `node.js`). */
interface Clause {
  /** As a reader splits them: PostgreSQL splits them further its own way, and snippets mark them. */
  words: string[];
  /** As FTS5 splits them (fts5-tokens.ts), which is finer than `words` where a mark or symbol splits a word. */
  terms: string[];
  /** The last word may be unfinished: the user is still typing it. */
  prefix: boolean;
  negated: boolean;
}

export interface Search {
  clauses: Clause[];
}

// Words are what both databases index: runs of letters, digits and the marks that accent them.
const WORD = /[\p{L}\p{N}\p{M}]+/gu;
// Marks only accent a letter or digit: a run of them alone is no word. Folding may leave nothing of one (unaccent
// drops 106 marks), and PostgreSQL refuses the empty prefix that would make.
const hasBase = (word: string) => /[\p{L}\p{N}]/u.test(word);
// A quoted phrase (its closing quote optional: the user may still be typing it), or a run without spaces.
const TOKEN = /(-?)(?:"([^"]*)"?|([^\s"]+))/gu;

/**
 * Reads the search box syntax: words (all must match), `"exact words"`, `-word` or `-"words"` to exclude, the last
 * word a prefix unless the text ends with a space or a quote. Punctuation is not syntax, so no input can make the
 * database parse an operator: it only separates words, as the indexes do.
 */
export function parseSearch(text: string): Search {
  const clauses: Clause[] = [];
  let lastIsBare = false;
  for (const [, minus, quoted, bare] of text.matchAll(TOKEN)) {
    const words = (quoted ?? bare ?? '').match(WORD)?.filter(hasBase);
    // Before folding case, which may change what FTS5 reads (`İ` lowers to `i` and a mark).
    const terms = fts5Terms(words?.join(' ') ?? '');
    if (!words?.length || !terms.length) continue;
    clauses.push({ words: words.map((word) => word.toLowerCase()), terms, prefix: false, negated: minus === '-' });
    lastIsBare = bare !== undefined;
  }
  refuseTooManyWords(clauses.reduce((count, clause) => count + clause.terms.length, 0));
  if (!clauses.some((clause) => !clause.negated)) throw unprocessable('q', 'needs a word to search for');
  const last = clauses.at(-1)!;
  const stillTyping = lastIsBare && !last.negated && /[\p{L}\p{N}\p{M}]$/u.test(text);
  if (stillTyping && [...last.terms.at(-1)!].length >= PREFIX_MIN) last.prefix = true;
  return { clauses };
}

function refuseTooManyWords(words: number) {
  if (words > SEARCH_WORDS_MAX) throw unprocessable('q', `can name at most ${SEARCH_WORDS_MAX} words`);
}

/**
 * The search as PostgreSQL will run it. Its parser splits words its own way after folding (`abc²abc` is one FTS5
 * term, and two lexemes there; it also differs with the database's locale), so PostgreSQL counts its terms itself,
 * in one statement before the search's, against the same bound. The word being typed stays a prefix only while it
 * folds to a single lexeme of PREFIX_MIN letters or more: to_tsquery would make a prefix of every lexeme of it.
 */
export async function asPostgresSearch(db: Executor, search: Search): Promise<Search> {
  const last = search.clauses.at(-1)!;
  const typed = last.prefix ? last.words.at(-1)! : '';
  const lexemes = (text: string) => sql`unnest(to_tsvector('simple', conduit_search_fold(${text})))`;
  const everyWord = search.clauses.flatMap((clause) => clause.words).join(' ');
  const { rows } = await sql<{ terms: string; typed_lexemes: string; typed_length: number | null }>`select
    (select coalesce(sum(cardinality(positions)), 0) from ${lexemes(everyWord)}) as terms,
    (select count(*) from ${lexemes(typed)}) as typed_lexemes,
    (select min(char_length(lexeme)) from ${lexemes(typed)}) as typed_length`.execute(db);
  const { terms, typed_lexemes, typed_length } = rows[0]!;
  refuseTooManyWords(Number(terms));
  const prefix = last.prefix && Number(typed_lexemes) === 1 && Number(typed_length) >= PREFIX_MIN;
  return prefix === last.prefix ? search : { clauses: [...search.clauses.slice(0, -1), { ...last, prefix }] };
}

// Every term is quoted, and none holds a quote (a separator), so nothing in it is FTS5 syntax; the tokenizer folds case
// and accents as it did when indexing.
const fts5Phrase = (clause: Clause) => `"${clause.terms.join(' ')}"${clause.prefix ? ' *' : ''}`;

/**
 * Each clause alone as an FTS5 query, exclusions included: what bm25() counts the articles of. A word being typed
 * counts as the word it is so far: counting every completion of a prefix costs as much as bm25() itself.
 */
export const fts5Phrases = ({ clauses }: Search): string[] => clauses.map((clause) => fts5Phrase({ ...clause, prefix: false }));

/** The search as an FTS5 query. FTS5's NOT is binary: the exclusions follow the words that must match. */
export function fts5Query({ clauses }: Search): string {
  const required = clauses.filter((clause) => !clause.negated).map(fts5Phrase);
  const excluded = clauses.filter((clause) => clause.negated).map(fts5Phrase);
  return [`(${required.join(' AND ')})`, ...excluded].join(' NOT ');
}

/**
 * The search as a PostgreSQL tsquery built from functions, never parsed from text the user wrote: each clause is
 * folded by the same function that folded the documents (migration 0011) and becomes a phrase; only a prefix, the
 * last word of its phrase and one lexeme (asPostgresSearch), goes through to_tsquery, quoted, after folding has
 * removed every character its syntax uses.
 */
export function tsQuery({ clauses }: Search): RawBuilder<string> {
  const phrase = (words: string[]) => sql`phraseto_tsquery('simple', conduit_search_fold(${words.join(' ')}))`;
  const part = (clause: Clause) => {
    let query = phrase(clause.words);
    if (clause.prefix) {
      const typed = sql`to_tsquery('simple', quote_literal(conduit_search_fold(${clause.words.at(-1)!})) || ':*')`;
      query = clause.words.length > 1 ? sql`(${phrase(clause.words.slice(0, -1))} <-> ${typed})` : typed;
    }
    return clause.negated ? sql`(!! ${query})` : query;
  };
  return sql<string>`(${sql.join(clauses.map(part), sql` && `)})`;
}

/**
 * Characters of a body a snippet is looked for in: a match further in is found by the search but shown from the
 * start. Bounds what a page of snippets reads and scans (at most 100 of these per page).
 */
export const SNIPPET_SCAN = 20_000;
/** Words a snippet shows, the matches among them. */
const SNIPPET_WORDS = 24;
/** Words shown before the first match, for context. */
const SNIPPET_LEAD = 4;

// Apostrophes too, as the snippets always escaped them.
const escapeHtml = (text: string) => escapeMarkup(text).replaceAll("'", '&#39;');
// Case and accents fold as the indexes fold them (for the letters both databases fold alike). Most words are ASCII,
// which has no accents to take off: normalizing only the others saves about a third of a page's snippet time.
const fold = (word: string) =>
  /[^\x20-\x7e]/.test(word) ? word.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase() : word.toLowerCase();

/**
 * The part of `text` around the search's first match, as HTML a frontend may insert as it is: the text escaped,
 * white space collapsed, matched words in <mark>. Made here rather than by each database (FTS5's snippet(),
 * PostgreSQL's ts_headline, which costs a quarter of a millisecond per article) so it is the same on both; the
 * scan stops once the snippet is complete.
 */
export function snippetHtml(text: string, { clauses }: Search): string {
  const wanted = clauses.filter((clause) => !clause.negated);
  const exact = new Set(wanted.flatMap((clause) => (clause.prefix ? clause.words.slice(0, -1) : clause.words)).map(fold));
  const prefixes = wanted.filter((clause) => clause.prefix).map((clause) => fold(clause.words.at(-1)!));
  const matches = (word: string) => {
    const folded = fold(word);
    return exact.has(folded) || prefixes.some((prefix) => folded.startsWith(prefix));
  };
  const scanned = text.slice(0, SNIPPET_SCAN);
  const words: RegExpExecArray[] = [];
  let start = -1;
  for (const word of scanned.matchAll(WORD)) {
    words.push(word);
    if (start < 0 && matches(word[0])) start = Math.max(0, words.length - 1 - SNIPPET_LEAD);
    // One word past the snippet says whether the text goes on.
    if (start >= 0 && words.length > start + SNIPPET_WORDS) break;
  }
  // No match in what is scanned (the search matched the title, the tags, or further in): the start of the text.
  start = Math.max(start, 0);
  const end = Math.min(words.length, start + SNIPPET_WORDS);
  // Text between words (punctuation, markup, white space) is shown escaped, and before the first word or after the
  // last only when the snippet starts or ends with the text.
  const gap = (from: number, to: number) => escapeHtml(scanned.slice(from, to).replace(/\s+/g, ' '));
  let html = start > 0 ? '… ' : gap(0, words[0]?.index ?? scanned.length).trimStart();
  for (let k = start; k < end; k++) {
    const word = words[k]!;
    const after = word.index + word[0].length;
    html += matches(word[0]) ? `<mark>${escapeHtml(word[0])}</mark>` : escapeHtml(word[0]);
    if (k + 1 < end) html += gap(after, words[k + 1]!.index);
    else if (end === words.length) html += gap(after, scanned.length).trimEnd();
  }
  return end < words.length ? `${html} …` : html;
}
