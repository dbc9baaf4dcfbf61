import { verify } from '@node-rs/argon2';
import { hashPassword } from '../../src/modules/users/passwords.js';

/**
 * Bare argon2id verification with the server's settings, `inFlight` at a time for `seconds`: the most logins per
 * second this machine could check, whatever the server does around them.
 */
const [seconds = 10, inFlight = 50] = process.argv.slice(2).map(Number);
const password = 'baseline-password';
const stored = await hashPassword(password);

let verifies = 0;
const started = performance.now();
const deadline = started + seconds * 1000;
const worker = async () => {
  while (performance.now() < deadline) {
    await verify(stored, password);
    verifies++;
  }
};
await Promise.all(Array.from({ length: inFlight }, worker));
process.send!({ verifies, seconds: (performance.now() - started) / 1000 });
process.disconnect();
