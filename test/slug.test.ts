import { describe, expect, it } from 'vitest';
import { slugify, suffixed } from '../src/modules/articles/slug.js';

const MAX_CODE_POINTS = 96;
/**
 * What a slug may look like: words joined by single dashes, each word a letter or digit followed by
 * letters, digits and the combining marks that belong to them (a word of marks alone shows nothing).
 */
const SLUG_SHAPE = /^[\p{L}\p{N}][\p{L}\p{M}\p{N}]*(?:-[\p{L}\p{N}][\p{L}\p{M}\p{N}]*)*$/u;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const codePoints = (text: string) => Array.from(text).length;

describe('slugify', () => {
  describe('ASCII titles', () => {
    it.each([
      ['Hello World', 'hello-world'],
      ['How to train your dragon', 'how-to-train-your-dragon'],
      ['Top 10 Tips for 2024', 'top-10-tips-for-2024'],
      ['UPPER lower MiXeD', 'upper-lower-mixed'],
      ['single', 'single'],
      ['42', '42'],
    ])('%j -> %j', (title, slug) => {
      expect(slugify(title)).toBe(slug);
    });
  });

  describe('punctuation and white space', () => {
    it.each([
      ['Hello, World!', 'hello-world'],
      ['What?! Really...', 'what-really'],
      ['  leading and trailing  ', 'leading-and-trailing'],
      ['many     spaces\there\nand\r\nlines', 'many-spaces-here-and-lines'],
      ['state-of-the-art', 'state-of-the-art'],
      ['a -- b --- c', 'a-b-c'],
      ['--dashes at the ends--', 'dashes-at-the-ends'],
      ['snake_case_title', 'snake-case-title'],
      ['C++ & C# (part 1/2)', 'c-c-part-1-2'],
      ['"Quoted" <tags> [brackets] {braces}', 'quoted-tags-brackets-braces'],
      ['100% sure: yes; no', '100-sure-yes-no'],
    ])('%j -> %j', (title, slug) => {
      expect(slugify(title)).toBe(slug);
    });
  });

  describe('apostrophes join the word instead of splitting it', () => {
    it.each([
      ["Don't stop", 'dont-stop'],
      ['It’s here', 'its-here'],
      ["L'été de l'année", 'lété-de-lannée'],
      ["rock 'n' roll", 'rock-n-roll'],
    ])('%j -> %j', (title, slug) => {
      expect(slugify(title)).toBe(slug);
    });
  });

  describe('unicode titles keep letters and digits of every script', () => {
    it.each([
      ['French accents are kept, lower-cased', 'Ça va? Élève à l’ÉCOLE', 'ça-va-élève-à-lécole'],
      ['German umlauts and sharp s', 'Über die Größe der Straße', 'über-die-größe-der-straße'],
      ['Cyrillic', 'Привет, Мир!', 'привет-мир'],
      ['Greek, final sigma lower-cased', 'Καλημέρα Κόσμε ΟΔΟΣ', 'καλημέρα-κόσμε-οδος'],
      ['Japanese', '日本語の記事', '日本語の記事'],
      ['Japanese with digits', '東京 2024年', '東京-2024年'],
      ['Chinese with a full-width comma', '你好，世界', '你好-世界'],
      ['Arabic', 'مرحبا بالعالم', 'مرحبا-بالعالم'],
      ['Hindi keeps its combining marks', 'नमस्ते दुनिया', 'नमस्ते-दुनिया'],
      ['mixed scripts', 'Ünïcode 101 Кириллица', 'ünïcode-101-кириллица'],
    ])('%s', (_name, title, slug) => {
      expect(slugify(title)).toBe(slug);
    });

    it('keeps the virama and vowel signs of Devanagari as code points', () => {
      // न म स ् त े - द ु न ि य ा
      expect(Array.from(slugify('नमस्ते दुनिया'), (c) => c.codePointAt(0))).toEqual([
        0x928, 0x92e, 0x938, 0x94d, 0x924, 0x947, 0x2d, 0x926, 0x941, 0x928, 0x93f, 0x92f, 0x93e,
      ]);
    });

    it('gives one slug for composed and decomposed forms of the same title', () => {
      const composed = 'Caf\u00e9 cr\u00e8me';
      const decomposed = 'Cafe\u0301 cre\u0300me';
      expect(slugify(decomposed)).toBe('caf\u00e9-cr\u00e8me');
      expect(slugify(decomposed)).toBe(slugify(composed));
    });

    it('folds compatibility forms (ligatures, full-width Latin and digits)', () => {
      expect(slugify('ﬁle ＡＢＣ １２３')).toBe('file-abc-123');
    });
  });

  describe('emoji are dropped', () => {
    it.each([
      ['rocket at the end', 'Launch day 🚀', 'launch-day'],
      ['emoji between words', 'cats 🐱 and dogs 🐶', 'cats-and-dogs'],
      ['skin tone modifier', '👍🏽 ok', 'ok'],
      ['zero-width-joiner sequence', '👨‍👩‍👧 family', 'family'],
      // ❤️ is U+2764 followed by the variation selector U+FE0F, which is not a letter of any word.
      ['emoji with a variation selector', 'I ❤️ TypeScript', 'i-typescript'],
      ['check mark with a variation selector', 'Ready ✔️', 'ready'],
      ['keycap sequence', '#️⃣ tag', 'tag'],
    ])('%s', (_name, title, slug) => {
      expect(slugify(title)).toBe(slug);
    });
  });

  describe('falls back to "article" when nothing is left', () => {
    it.each([
      ['only punctuation', '!!! ??? ###'],
      ['empty', ''],
      ['only white space', ' \t\n '],
      ['only apostrophes', "''’"],
      ['only dashes', '-----'],
      ['only emoji', '🚀🔥🎉'],
      ['only an emoji with a variation selector', '❤️'],
    ])('%s', (_name, title) => {
      expect(slugify(title)).toBe('article');
    });
  });

  describe('long titles', () => {
    it(`cuts a long ASCII title to ${MAX_CODE_POINTS} code points`, () => {
      expect(slugify('a'.repeat(300))).toBe('a'.repeat(MAX_CODE_POINTS));
    });

    it('leaves no trailing dash when the cut falls on a word boundary', () => {
      // Joined, the dash is the 96th code point; it must not survive the cut.
      expect(slugify(`${'a'.repeat(95)} ${'b'.repeat(20)}`)).toBe('a'.repeat(95));
    });

    it('keeps a title of exactly 96 code points whole', () => {
      const title = `${'x'.repeat(47)} ${'y'.repeat(48)}`;
      expect(slugify(title)).toBe(`${'x'.repeat(47)}-${'y'.repeat(48)}`);
    });

    it('never splits a surrogate pair of an astral letter', () => {
      // U+20000 is a CJK letter outside the BMP: two UTF-16 units each.
      const slug = slugify('\u{20000}'.repeat(200));
      expect(codePoints(slug)).toBe(MAX_CODE_POINTS);
      expect(slug.length).toBe(2 * MAX_CODE_POINTS);
      expect(slug).toBe('\u{20000}'.repeat(MAX_CODE_POINTS));
      expect(LONE_SURROGATE.test(slug)).toBe(false);
    });

    it('never splits a surrogate pair when BMP and astral letters alternate', () => {
      // 95 BMP letters put the 96th code point on an astral letter; a cut on UTF-16 units would halve it.
      const slug = slugify(`${'é'.repeat(95)}\u{20000}\u{20000}\u{20000}`);
      expect(slug).toBe(`${'é'.repeat(95)}\u{20000}`);
      expect(LONE_SURROGATE.test(slug)).toBe(false);
    });

    it.each([
      'The quick brown fox jumps over the lazy dog '.repeat(10),
      'Ça va? '.repeat(40),
      '日本語の記事 '.repeat(40),
      '𝒳𝒴 \u{20000}\u{20001} '.repeat(60),
      'नमस्ते दुनिया '.repeat(20),
    ])('stays within the limit, well formed and dash-free at both ends (%#)', (title) => {
      const slug = slugify(title);
      expect(codePoints(slug)).toBeLessThanOrEqual(MAX_CODE_POINTS);
      expect(codePoints(slug)).toBeGreaterThan(MAX_CODE_POINTS - 16);
      expect(slug).toMatch(SLUG_SHAPE);
      expect(LONE_SURROGATE.test(slug)).toBe(false);
    });
  });

  it.each([
    'Hello World',
    'A title, with: punctuation!',
    'Ça va? Ünïcode 101',
    'Ελληνικά και Русский',
    '  spaced   out  ',
    'I ❤️ TypeScript',
  ])('always yields a lower-case kebab-case slug (%j)', (title) => {
    const slug = slugify(title);
    expect(slug).toMatch(SLUG_SHAPE);
    expect(slug).toBe(slug.toLowerCase());
  });

  it('is stable: slugifying a slug changes nothing', () => {
    for (const title of ['Hello World', 'Ça va? Élève', '日本語の記事', 'a -- b']) {
      const slug = slugify(title);
      expect(slugify(slug)).toBe(slug);
    }
  });
});

describe('suffixed', () => {
  it('appends a dash and eight hex digits', () => {
    expect(suffixed('hello-world')).toMatch(/^hello-world-[0-9a-f]{8}$/);
  });

  it('gives different suffixes on different calls', () => {
    const slugs = new Set(Array.from({ length: 50 }, () => suffixed('same')));
    expect(slugs.size).toBe(50);
  });
});
