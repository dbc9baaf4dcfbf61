/** Code-point order: the same in every locale and on both databases, whose SQL collations disagree. */
export const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Trimmed, without duplicates: the form in which tags are stored. */
export const normalizeTags = (names: string[]) => [...new Set(names.map((name) => name.trim()))].sort(byCodePoint);
