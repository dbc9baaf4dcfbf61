/** Surrogates (astral characters) after U+E000–U+FFFF, where code points put them; the rest keep their order. */
const codePointRank = (unit: number) => (unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit);

/**
 * Code-point order, as UTF-8 bytes compare: the same in every locale, and what the tag list gets in SQL on both
 * databases. JavaScript's `<` compares UTF-16 units, which puts an emoji before a fullwidth letter.
 */
export function byCodePoint(a: string, b: string): number {
  if (a === b) return 0;
  const shorter = Math.min(a.length, b.length);
  let at = 0;
  while (at < shorter && a.charCodeAt(at) === b.charCodeAt(at)) at++;
  if (at === shorter) return a.length < b.length ? -1 : 1;
  return codePointRank(a.charCodeAt(at)) < codePointRank(b.charCodeAt(at)) ? -1 : 1;
}

/** Trimmed, without duplicates: the form in which tags are stored. */
export const normalizeTags = (names: string[]) => [...new Set(names.map((name) => name.trim()))].sort(byCodePoint);
