import { randomBytes } from 'node:crypto';

const MAX_BASE_LENGTH = 96;
const FALLBACK = 'article';
/**
 * Paths the API serves where a slug would go (`GET /api/articles/feed`): an article given one as its slug could
 * never be read. A new static route under /api/articles/ adds its word here; test/articles.test.ts checks the router.
 */
export const ROUTE_WORDS: ReadonlySet<string> = new Set(['feed']);

/**
 * Kebab-case of a title that keeps letters and digits of every script: "Ça va? Ünïcode 101" becomes
 * "ça-va-ünïcode-101", "日本語の記事" stays readable. NFKC folds look-alike forms (ﬁ, full-width Latin) first;
 * apostrophes join words ("don't" -> "dont") instead of splitting them.
 */
export function slugify(title: string): string {
  const words = title
    .normalize('NFKC')
    .toLowerCase()
    .replace(/['’]/g, '')
    // A word starts with a letter or digit; marks only ever extend one. Emoji variation selectors and the
    // keycap sign are marks too, and would otherwise survive as invisible slugs.
    .match(/[\p{L}\p{N}][\p{L}\p{M}\p{N}]*/gu);
  if (words === null) return FALLBACK;
  // Cut on code points, never inside a surrogate pair, and never leave a dangling dash.
  const slug = Array.from(words.join('-')).slice(0, MAX_BASE_LENGTH).join('').replace(/-+$/, '');
  if (slug === '') return FALLBACK;
  return ROUTE_WORDS.has(slug) ? `${slug}-${FALLBACK}` : slug;
}

/** A taken slug gets a short random suffix; random, not a counter, so concurrent creates do not collide again. */
export const suffixed = (base: string) => `${base}-${randomBytes(4).toString('hex')}`;
