import type { FastifyInstance } from 'fastify';
import { parseFragment } from 'parse5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { parseSearch, SEARCH_WORDS_MAX, snippetHtml } from '../src/modules/articles/search.js';
import { createScratchDatabase, DATABASES, describeEachDatabase, type ScratchDatabase, testConfig, withAdmin } from './support/app.js';
import { call, createArticle, registerUser, type TestUser, unique } from './support/client.js';
import { lockTable, lockWaiter, type TableLock } from './support/locks.js';

interface Hit {
  slug: string;
  title: string;
  snippet?: string;
}

describe('search syntax', () => {
  it('reads words, phrases, exclusions and a prefix for the word being typed', () => {
    expect(parseSearch('Red "quick fox" -slow node.jsx')).toEqual({
      clauses: [
        { words: ['red'], terms: ['Red'], prefix: false, negated: false },
        { words: ['quick', 'fox'], terms: ['quick', 'fox'], prefix: false, negated: false },
        { words: ['slow'], terms: ['slow'], prefix: false, negated: true },
        { words: ['node', 'jsx'], terms: ['node', 'jsx'], prefix: true, negated: false },
      ],
    });
    expect(parseSearch('typing ').clauses.at(-1)!.prefix).toBe(false);
    expect(parseSearch('"closed phrase"').clauses.at(-1)!.prefix).toBe(false);
    expect(parseSearch('go').clauses.at(-1)!.prefix).toBe(false);
    expect(parseSearch('gol').clauses.at(-1)!.prefix).toBe(true);
  });

  it('counts words and prefixes as the index splits and folds them', () => {
    // One word to a regular expression of letters and marks, a hundred terms to FTS5, which splits at U+20DD.
    expect(() => parseSearch('a\u20dd'.repeat(100))).toThrow(/at most 12 words/);
    expect(() => parseSearch(`${'x\u0903'.repeat(SEARCH_WORDS_MAX)}x`)).toThrow(/at most 12 words/);
    expect(parseSearch('x\u0903'.repeat(SEARCH_WORDS_MAX - 1)).clauses[0]!.terms).toHaveLength(SEARCH_WORDS_MAX - 1);
    // FTS5 drops the accents: the prefix would be `t*`.
    expect(parseSearch('t\u0301\u0301')).toEqual({ clauses: [{ words: ['t\u0301\u0301'], terms: ['t'], prefix: false, negated: false }] });
    expect(parseSearch('tu\u0301\u0301').clauses[0]!.prefix).toBe(false);
    expect(parseSearch('tu\u0301v').clauses[0]!.prefix).toBe(true);
  });

  it('refuses a search with nothing to find or too many words', () => {
    for (const text of ['-only -exclusions', '" & | ! ( ) : * <->', '--', '\u0301\u0301\u0301', '\u0345\u0345\u0345']) {
      expect(() => parseSearch(text), text).toThrow(/needs a word/);
    }
    expect(() => parseSearch(Array.from({ length: SEARCH_WORDS_MAX + 1 }, (_, i) => `w${i}`).join(' '))).toThrow(/at most/);
  });

  it('snips around the first match, escaped, with the matches marked', () => {
    const text = `Intro ${'filler '.repeat(40)}the quick Fox jumps over the lazy dog ${'more '.repeat(40)}`;
    const html = snippetHtml(text, parseSearch('fox jum'));
    expect(html).toMatch(/^… filler filler the quick <mark>Fox<\/mark> <mark>jumps<\/mark> over /);
    expect(html).toMatch(/ …$/);
    expect(snippetHtml('<b>Crème</b> & "co"\n\n', parseSearch('creme '))).toBe(
      '&lt;b&gt;<mark>Crème</mark>&lt;/b&gt; &amp; &quot;co&quot;',
    );
    // No match in what is scanned: the start of the text, unmarked.
    expect(snippetHtml('one two three', parseSearch('absent'))).toBe('one two three');
    // Excluded words are not marked.
    expect(snippetHtml('keep drop', parseSearch('keep -drop'))).toBe('<mark>keep</mark> drop');
  });
});

describeEachDatabase('search', (ctx) => {
  const app = () => ctx().app;
  let author: TestUser;
  let other: TestUser;
  /** A word no other test writes, so that every search here sees only this file's articles. */
  const word = unique('zq');
  const search = (query: string, token?: string) =>
    call<{ articles: Hit[]; articlesCount: number; nextCursor: string | null; errors?: Record<string, string[]> }>(
      app(),
      'GET',
      `/api/articles?${query}`,
      { token },
    );
  const titles = (hits: Hit[]) => hits.map((hit) => hit.title);
  const found = async (q: string) => {
    const response = await search(`q=${encodeURIComponent(q)}`);
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return titles(response.body.articles);
  };

  beforeAll(async () => {
    [author, other] = await Promise.all([registerUser(app(), 'writer'), registerUser(app(), 'other')]);
    const filler = 'plain words about nothing in particular';
    // One article per field the word can be in; written best-ranked last, so that newest-first order is the reverse.
    await createArticle(app(), author.token, { title: 'in body', description: filler, body: `${filler} ${word}`, tagList: ['x'] });
    await createArticle(app(), author.token, { title: 'in description', description: `${filler} ${word}`, body: filler, tagList: ['x'] });
    await createArticle(app(), author.token, { title: 'in tags', description: filler, body: filler, tagList: [word] });
    await createArticle(app(), other.token, { title: `in title ${word}`, description: filler, body: filler, tagList: ['x'] });
  });

  it('ranks a title match over a tag, a tag over the description, the description over the body', async () => {
    expect(await found(word)).toEqual([`in title ${word}`, 'in tags', 'in description', 'in body']);
  });

  it('combines with the filters and counts the matches', async () => {
    const byAuthor = await search(`q=${word}&author=${author.username}`);
    expect(titles(byAuthor.body.articles)).toEqual(['in tags', 'in description', 'in body']);
    expect(byAuthor.body.articlesCount).toBe(3);
    expect(titles((await search(`q=${word}&tag=${word}`)).body.articles)).toEqual(['in tags']);
    expect((await search(`q=${word}&tag=${unique('none')}`)).body).toEqual({ articles: [], articlesCount: 0, nextCursor: null });
  });

  it('needs every word, keeps phrases in order, excludes, and completes the last word', async () => {
    const key = unique('kw');
    await createArticle(app(), author.token, { title: `${key} quick brown fox`, body: 'jumps' });
    await createArticle(app(), author.token, { title: `${key} brown quick dog`, body: 'sleeps' });
    expect(await found(`${key} quick brown`)).toHaveLength(2);
    expect(await found(`${key} "quick brown"`)).toEqual([`${key} quick brown fox`]);
    expect(await found(`${key} quick -fox`)).toEqual([`${key} brown quick dog`]);
    expect(await found(`${key} -"quick brown"`)).toEqual([`${key} brown quick dog`]);
    expect(await found(`${key} slee`)).toEqual([`${key} brown quick dog`]);
    // A space after the word says it is complete.
    expect(await found(`${key} slee `)).toEqual([]);
  });

  it('folds case and accents the same way on both databases, and splits on punctuation', async () => {
    const key = unique('kw');
    await createArticle(app(), author.token, { title: `${key} Crème Brûlée at the CAFÉ`, body: 'Uses node.js and Ångström units' });
    for (const query of ['creme brulee', 'CRÈME', 'café', 'cafe', 'angstrom', 'node', 'node.js', '"node js"']) {
      expect(await found(`${key} ${query}`), query).toEqual([`${key} Crème Brûlée at the CAFÉ`]);
    }
  });

  it('keeps the index exact through edits, tag changes and deletes', async () => {
    const [before, after, tagged] = [unique('old'), unique('new'), unique('tag')];
    const article = await createArticle(app(), author.token, { title: `title ${before}` });
    expect(await found(before)).toEqual([`title ${before}`]);
    const put = await call(app(), 'PUT', `/api/articles/${article.slug}`, {
      token: author.token,
      body: { article: { title: `title ${after}`, tagList: [tagged] } },
    });
    expect(put.status).toBe(200);
    expect(await found(before)).toEqual([]);
    expect(await found(after)).toEqual([`title ${after}`]);
    expect(await found(tagged)).toEqual([`title ${after}`]);
    // A favorite changes the article's row but none of its text.
    await call(app(), 'POST', `/api/articles/${put.body.article.slug}/favorite`, { token: other.token });
    expect(await found(after)).toEqual([`title ${after}`]);
    await call(app(), 'DELETE', `/api/articles/${put.body.article.slug}`, { token: author.token });
    expect(await found(after)).toEqual([]);
    expect(await found(tagged)).toEqual([]);
  });

  it('answers a snippet of the body with the matches marked and the rest escaped', async () => {
    const key = unique('kw');
    await createArticle(app(), author.token, {
      title: 'snippet',
      body: `Some text before <script>alert(1)</script> the ${key} appears here & after`,
    });
    const [hit] = (await search(`q=${key}`)).body.articles;
    expect(hit!.snippet).toContain(`<mark>${key}</mark>`);
    const elements: string[] = [];
    const walk = (node: { nodeName: string; childNodes?: unknown[] }) => {
      if (!node.nodeName.startsWith('#')) elements.push(node.nodeName);
      for (const child of node.childNodes ?? []) walk(child as typeof node);
    };
    walk(parseFragment(hit!.snippet!) as never);
    expect(elements).toEqual(['mark']);
    // Lists without a search carry no snippet.
    const [plain] = (await search(`author=${author.username}&limit=1`)).body.articles;
    expect(plain).not.toHaveProperty('snippet');
  });

  it('answers hostile queries with a 422 or a harmless search, never a 500', async () => {
    const hostile = [
      `${word} AND OR NOT NEAR`,
      `${word} & | ! <-> :* ( ) ' \\`,
      `${word}" OR "1"="1`,
      `${word} title:x body:* ^start`,
      `${word} ŉ ß ﬁ \u202Eevil`,
      `${word} ${'('.repeat(90)}`,
    ];
    for (const q of hostile) {
      const response = await search(`q=${encodeURIComponent(q)}`);
      expect(response.status, `${q}: ${JSON.stringify(response.body)}`).toBe(200);
    }
    for (const q of ['x'.repeat(10_000), '-a -b', '" "', Array.from({ length: 13 }, (_, i) => `w${i}`).join(' ')]) {
      const response = await search(`q=${encodeURIComponent(q)}`);
      expect(response.status, q.slice(0, 40)).toBe(422);
      expect(response.body.errors).toHaveProperty('q');
    }
    // Blank means no search, as an empty filter means no filter.
    expect((await search('q=%20%20&limit=1')).status).toBe(200);
  });

  it('refuses a search of combining marks alone, which fold to nothing, and finds a word they follow', async () => {
    // unaccent folds these to nothing where the database's locale does not count them as punctuation, which the fold
    // first turns into spaces: U+0345 (a letter to glibc) under `C.UTF-8`, U+0301 too under `C`.
    const marks = ['\u0345\u0345\u0345', '\u0301\u0301\u0301'];
    // The Combining Diacritical Marks block, which holds most of the 106 marks unaccent drops.
    const block = String.fromCodePoint(...Array.from({ length: 0x70 }, (_, i) => 0x300 + i));
    for (const q of [...marks, ...marks.map((text) => `"${text}"`), block]) {
      const response = await search(`q=${encodeURIComponent(q)}`);
      expect(response.status, `${q}: ${JSON.stringify(response.body)}`).toBe(422);
      expect(response.body.errors).toEqual({ q: ['needs a word to search for'] });
    }
    for (const text of marks) expect(await found(`${word} ${text}`)).toEqual(await found(word));
  });

  it('counts the words the index looks up, not what looks like one word', async () => {
    // One run of letters and marks, a hundred terms to FTS5 (U+20DD splits) and to PostgreSQL's parser.
    const response = await search(`q=${encodeURIComponent('a\u20dd'.repeat(100))}`);
    expect(response.status).toBe(422);
    expect(response.body.errors).toEqual({ q: ['can name at most 12 words'] });
    // One term to FTS5, 66 to PostgreSQL, whose parser splits at `²`: each database counts its own.
    const superscripts = await search(`q=${encodeURIComponent('ab\u00b2'.repeat(66))}`);
    expect(superscripts.status, JSON.stringify(superscripts.body)).toBe(ctx().kind === 'postgres' ? 422 : 200);
  });

  it('completes only a word of three letters as the index folds it', async () => {
    const tWord = unique('t');
    const typedWord = unique('w');
    await createArticle(app(), author.token, { title: `${word} ${tWord}`, body: `${typedWord} dz` });
    expect(await found(`${word} ${tWord.slice(0, 4)}`)).toEqual([`${word} ${tWord}`]);
    // Two accents FTS5 and unaccent drop: `t`, no prefix of three letters.
    expect(await found(`${word} t\u0301\u0301`)).toEqual([]);
    // One FTS5 term, but two lexemes to PostgreSQL (`²` splits): only a whole last word may be completed.
    expect(await found(`${word} ${typedWord}\u00b2d`)).toEqual([]);
  });

  it("takes a client's searches in turns with everyone else's, refusing a client's third at once", async () => {
    const many = Array.from({ length: 8 }, () => search(`q=${word}`, author.token));
    const bystander = search(`q=${word}`, other.token);
    const answers = await Promise.all(many);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.filter((answer) => answer.status === 200).length).toBeGreaterThanOrEqual(2);
    expect(refused[0]!.body).toEqual({ errors: { rate: ['limit exceeded'] } });
    expect(refused[0]!.headers['retry-after']).toBe('1');
    expect((await bystander).status).toBe(200);
    // The refused ones held no place: the next search goes through.
    expect((await search(`q=${word}`, author.token)).status).toBe(200);
  });

  it('pages through results with a cursor, without repeats, while articles arrive', async () => {
    const key = unique('page');
    for (let i = 0; i < 7; i++) {
      await createArticle(app(), author.token, { title: `${key} ${'again '.repeat(i)}`.trim(), body: 'text' });
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const response = await search(`q=${key}&limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      expect(response.body.articlesCount).toBe(7);
      seen.push(...response.body.articles.map((hit) => hit.slug));
      cursor = response.body.nextCursor;
      // A new match arriving mid-way is not ranked into the pages already being read.
      if (pages++ === 0) await createArticle(app(), author.token, { title: `${key} ${key} latecomer`, body: 'text' });
    } while (cursor);
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);
    expect(pages).toBe(3);
    // A search cursor belongs to searches.
    const first = await search(`q=${key}&limit=1`);
    const misuse = await search(`limit=1&cursor=${first.body.nextCursor}`);
    expect(misuse.status).toBe(422);
    expect(misuse.body.errors?.cursor).toEqual(['belongs to a search']);
  });
});

describe.skipIf(!DATABASES.includes('postgres'))('search on PostgreSQL out of time for older matches', () => {
  let scratch: ScratchDatabase;
  let app: FastifyInstance;

  beforeAll(async () => {
    scratch = await createScratchDatabase('postgres');
    app = await buildApp(testConfig(scratch.url));
  });
  afterAll(async () => {
    await app?.close();
    await scratch?.drop();
  });

  it('says that its answer is partial, and only then', async () => {
    const author = await registerUser(app, 'writer');
    const word = unique('zq');
    await createArticle(app, author.token, { title: `older ${word}` });
    // Far past the newest 20,000 articles (list.ts RECENT_WINDOW): the older article is found by the second step only.
    await withAdmin((client) => client.query(`select setval(pg_get_serial_sequence('articles', 'id'), 100000)`), scratch.url);
    await createArticle(app, author.token, { title: `newer ${word}` });
    const search = () => call(app, 'GET', `/api/articles?q=${word}`);

    const whole = await search();
    expect(whole.body).toMatchObject({ articlesCount: 2, nextCursor: null });
    expect(whole.body).not.toHaveProperty('partial');

    // The lock on the articles holds the first step (it reads them too) while it has the index in hand, so that the
    // lock on the index, asked for meanwhile, is granted the moment that step ends: the second step then waits on it
    // until its time runs out, and the ranking, which reads the index as well, until the test lets it go.
    const articles = await lockTable(scratch.url, 'articles');
    await articles.granted;
    const answer = search();
    let index: TableLock;
    try {
      await lockWaiter(scratch.url, { pattern: '%order by article_id desc%' });
      index = await lockTable(scratch.url, 'article_search');
      await lockWaiter(scratch.url, { pid: index.pid });
    } finally {
      await articles.release();
    }
    try {
      await lockWaiter(scratch.url, { pattern: '%ts_rank_cd%' });
    } finally {
      await index.release();
    }
    const partial = await answer;
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ articlesCount: 1, nextCursor: null, partial: true });
    expect(partial.body.articles.map((hit: Hit) => hit.title)).toEqual([`newer ${word}`]);
  });
});
