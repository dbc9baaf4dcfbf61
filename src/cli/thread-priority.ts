import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The lowest there is: such a thread runs on what CPU time the event loop leaves. */
export const HELPER_THREAD_NICE = 19;

const THREADS_DIR = '/proc/self/task';

/**
 * Gives every thread of this process but the event loop's the lowest CPU priority: libuv's pool, where each
 * login's argon2 hash keeps a core busy for about 10 ms, and V8's background collectors and compilers. When
 * logins keep every core busy, the event loop would otherwise wait behind them for a time slice, and every
 * request would feel it (docs/DEPLOY.md has the figures). The hashes lose little: the loop needs little of a core.
 *
 * Linux only, where a thread's nice value is its own and /proc lists the threads; elsewhere nothing changes.
 * Call once libuv's pool exists (buildApp hashes the decoy): libuv starts all of its threads at first use.
 * Answers how many threads were lowered.
 */
export function lowerHelperThreadPriority(): number {
  if (process.platform !== 'linux') return 0;
  let lowered = 0;
  for (const entry of readdirSync(THREADS_DIR)) {
    const threadId = Number(entry);
    // On Linux the process id is the main thread's id, and the main thread runs the event loop.
    if (threadId === process.pid) continue;
    try {
      setPriority(threadId, HELPER_THREAD_NICE);
      lowered++;
    } catch (error) {
      // A thread that ended since the listing has nothing left to lower.
      if ((error as { info?: { code?: string } }).info?.code !== 'ESRCH') throw error;
    }
  }
  return lowered;
}
