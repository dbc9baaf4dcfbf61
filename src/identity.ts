/**
 * Case-insensitive identity: usernames and emails compare by this key, stored beside the original. A leaf
 * module, because the rate limits name accounts by it too and must not depend on the users module.
 */
export const identityKey = (value: string) => value.normalize('NFC').toLowerCase();
