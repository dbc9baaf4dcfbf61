import { forkEntry, nextMessage } from './child.js';

export interface Argon2Baseline {
  verifiesPerSecond: number;
  inFlight: number;
  seconds: number;
}

/** Runs in a child process so that the bench's own event loop and autocannon take no share of its thread pool. */
export async function measureArgon2(seconds: number, inFlight: number): Promise<Argon2Baseline> {
  const child = forkEntry(new URL('./argon2-child.ts', import.meta.url), [String(seconds), String(inFlight)]);
  const result = await nextMessage<{ verifies: number; seconds: number }>(child);
  return { verifiesPerSecond: result.verifies / result.seconds, inFlight, seconds: result.seconds };
}
