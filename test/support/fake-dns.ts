import type { LookupAddress, LookupAllOptions } from 'node:dns';
import { isIP } from 'node:net';

/**
 * Names the tests make up, with what DNS should answer for them: their addresses, or that no such name exists. A
 * name that resolves to 127.0.0.1 without being called localhost is how a real attacker gets past the URL check, and
 * only the lookup can catch it.
 */
export const fakeDns = new Map<string, string[] | 'nonexistent'>();
/** How long the answer for a name takes, when not at once: a made-up name can take longer than an internal one. */
export const fakeDnsDelays = new Map<string, number>();

type LookupCallback = (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void;

/** `node:dns` with a `lookup` that answers fakeDns's names itself; for `vi.mock('node:dns', ...)`. */
export function withFakeLookup(dns: typeof import('node:dns')) {
  const lookup = (hostname: string, options: LookupAllOptions, callback: LookupCallback) => {
    const answer = fakeDns.get(hostname);
    if (answer === undefined) {
      dns.lookup(hostname, options, callback);
      return;
    }
    const answered = () =>
      answer === 'nonexistent'
        ? callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), [])
        : callback(
            null,
            answer.map((address) => ({ address, family: isIP(address) })),
          );
    setTimeout(answered, fakeDnsDelays.get(hostname) ?? 0);
  };
  return { ...dns, lookup };
}
