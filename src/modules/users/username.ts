import { unprocessable } from '../../errors.js';
import { USERNAME_MAX, USERNAME_PATTERN, USERNAME_RULE } from './schemas.js';

const USERNAME_SHAPE = new RegExp(USERNAME_PATTERN, 'u');

/**
 * The username as stored and shown: NFKC folds fullwidth letters, ligatures and other compatibility forms into
 * the characters they display, so "ｊａｋｅ" is "jake". The schema judged what was sent; the folded name is
 * judged again, since folding can yield characters the rules refuse ("½" becomes "1⁄2").
 */
export function canonicalUsername(sent: string): string {
  const username = sent.normalize('NFKC');
  if (Array.from(username).length > USERNAME_MAX) {
    throw unprocessable('username', `is too long (maximum is ${USERNAME_MAX} characters)`);
  }
  if (!USERNAME_SHAPE.test(username)) throw unprocessable('username', USERNAME_RULE);
  return username;
}
