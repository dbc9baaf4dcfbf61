import { randomBytes } from 'node:crypto';
import { hash, verify, type Options } from '@node-rs/argon2';

/**
 * argon2id with OWASP's first recommended setting (19 MiB, 2 passes, 1 lane). Hashing runs on libuv's
 * thread pool, so the event loop stays free while a login is checked.
 */
export const ARGON2_OPTIONS: Options = {
  algorithm: 2, // Algorithm.Argon2id; the enum is const and erased under isolatedModules
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
};

export const hashPassword = (password: string) => hash(password, ARGON2_OPTIONS);

let decoyHash: Promise<string> | undefined;
const decoy = () => (decoyHash ??= hashPassword(randomBytes(16).toString('hex')));

/**
 * Checks a password against a stored hash, or against a decoy hash when the account does not exist,
 * so an unknown email costs the same work and time as a wrong password.
 */
export async function verifyPassword(storedHash: string | undefined, password: string): Promise<boolean> {
  if (storedHash === undefined) {
    await verify(await decoy(), password);
    return false;
  }
  return verify(storedHash, password);
}

/** Computes the decoy ahead of the first failed login, so that one is not slower than the rest. */
export const prepareDecoy = (): Promise<unknown> => decoy();
