import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { hash, type Options, verify as verifyHash } from '@node-rs/argon2';
import { FifoSlots } from '../../fifo-slots.js';

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

/**
 * At most one argon2 computation per core at a time. More cannot finish sooner (each one keeps a core busy),
 * but each holds its 19 MiB and a libuv thread: a burst of logins would take every thread from the rest of
 * the process and inflate memory by 19 MiB per waiting login. Waiting here costs neither.
 */
const argon2Slots = new FifoSlots(Math.max(1, availableParallelism()));

export const hashPassword = (password: string) => argon2Slots.run(() => hash(password, ARGON2_OPTIONS));
const verify = (storedHash: string, password: string) => argon2Slots.run(() => verifyHash(storedHash, password));

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
