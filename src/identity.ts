import { CONFUSABLES } from './confusables.js';

/**
 * Case-insensitive identity: usernames and emails compare by this key, stored beside the original. A leaf
 * module, because the rate limits name accounts by it too and must not depend on the users module.
 */
export const identityKey = (value: string) => value.normalize('NFC').toLowerCase();

/**
 * The key of a username, stored or asked for: usernames are stored in NFKC (users/username.ts), so a name typed
 * in any compatibility form ("ｊａｋｅ" in a URL or a filter) is folded the same way before it is compared.
 */
export const usernameKey = (username: string) => identityKey(username.normalize('NFKC'));

/**
 * Unicode's confusables (UTS #39): each character that looks like another, mapped to the one that stands for
 * both. Generated from the ICU data of a current Node (scripts/confusables.ts, which says why that source); a new
 * table changes skeletons, so it comes with a migration that recomputes the stored ones (0019).
 */
const PROTOTYPES = new Map(
  CONFUSABLES.trim()
    .split('\n')
    .map((line) => {
      const [from, ...to] = line.split(' ').map((code) => String.fromCodePoint(Number.parseInt(code, 16)));
      return [from!, to.join('')];
    }),
);

/** UTS #39's skeleton: decomposed, each character replaced by its prototype, decomposed again. */
function skeleton(text: string): string {
  let mapped = '';
  for (const character of text.normalize('NFD')) mapped += PROTOTYPES.get(character) ?? character;
  return mapped.normalize('NFD');
}

/**
 * What a username looks like: two names with one skeleton ("paypal" and "pаypаl" with Cyrillic a's, "admin" and
 * "adrnin") would pass for each other, so the database keeps skeletons unique. Taken before and after lower-casing,
 * because names are shown as typed but compared without case: "Ivan" looks like "lvan", and "Jake" like "јake".
 */
export const usernameSkeleton = (username: string) => skeleton(skeleton(username).toLowerCase());

/**
 * The first name `propose` comes up with whose skeleton is not in `taken`, which then holds it: for the seeders,
 * whose made-up names could look alike ("AnnHill12" and "AnnHil112") and so break the unique skeletons.
 */
export function lookingUnlikeAny(taken: Set<string>, propose: () => string): string {
  for (;;) {
    const username = propose();
    const skeleton = usernameSkeleton(username);
    if (!taken.has(skeleton)) {
      taken.add(skeleton);
      return username;
    }
  }
}
