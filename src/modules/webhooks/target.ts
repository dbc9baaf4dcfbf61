import { lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * A webhook URL the server refuses to call. Users choose these URLs, so without the checks below anyone could make
 * the server send requests into its own network (server-side request forgery). Its `code` lets safeLookup fail a
 * connection with it like any other socket error.
 */
export class UnsafeTarget extends Error {
  readonly code = 'EUNSAFETARGET';
}

interface TargetOptions {
  /** For tests and local development: permits 127.0.0.0/8, ::1 and localhost, and nothing else private. */
  allowLoopback: boolean;
}

const MAX_URL_LENGTH = 2_000;

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

// Everything a public endpoint never is: addresses that reach this host, its private networks, the cloud metadata
// services (169.254.169.254 and fd00:ec2::254 sit in the link-local and unique-local ranges) or no one at all.
const refused = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"; connecting to 0.0.0.0 reaches the local host
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT, private to the provider's network
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, with the 255.255.255.255 broadcast
] as const) {
  refused.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 96], // unspecified, and the deprecated IPv4-compatible form that nothing legitimate uses
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local, still routed by some stacks
  ['ff00::', 8], // multicast
] as const) {
  refused.addSubnet(network, prefix, 'ipv6');
}

/** The eight 16-bit groups of a valid IPv6 address, with a dotted IPv4 tail rewritten as two groups first. */
function ipv6Groups(address: string): number[] {
  const text = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) => {
    const high = (Number(a) << 8) | Number(b);
    const low = (Number(c) << 8) | Number(d);
    return `${high.toString(16)}:${low.toString(16)}`;
  });
  const [left = '', right] = text.split('::');
  const head = left === '' ? [] : left.split(':');
  const tail = right === undefined || right === '' ? [] : right.split(':');
  const zeros = new Array<string>(8 - head.length - tail.length).fill('0');
  return [...head, ...zeros, ...tail].map((group) => Number.parseInt(group, 16));
}

const dotted = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;

/**
 * The IPv4 address an IPv6 address stands for, where packets to it end up at that IPv4 host: IPv4-mapped
 * (::ffff:a.b.c.d, which a dual-stack socket connects to over IPv4), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 * Without this, ::ffff:127.0.0.1 or 64:ff9b::a9fe:a9fe would slip past the IPv4 ranges.
 */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address) as [number, number, number, number, number, number, number, number];
  const zeroUpTo = (end: number) => g.slice(0, end).every((group) => group === 0);
  if (zeroUpTo(5) && g[5] === 0xffff) return dotted(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((group) => group === 0)) return dotted(g[6], g[7]);
  if (g[0] === 0x2002) return dotted(g[1], g[2]);
  return null;
}

/** Whether a webhook may not connect to this IP address. Anything that is not an IP address is refused too. */
export function isRefusedAddress(address: string, options: TargetOptions): boolean {
  const family = isIP(address);
  // A zone index (fe80::1%eth0) only ever qualifies a link-local address.
  if (family === 0 || address.includes('%')) return true;
  if (family === 6) {
    const ipv4 = embeddedIpv4(address);
    if (ipv4 !== null) return isRefusedAddress(ipv4, options);
  }
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (loopback.check(address, type)) return !options.allowLoopback;
  return refused.check(address, type);
}

/** Names that resolve inside the host or its cloud rather than in public DNS, whatever a resolver answers. */
function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost');
}

function isInternalName(name: string): boolean {
  // Covers metadata.google.internal and the other cloud providers' private zones.
  return name === 'internal' || name.endsWith('.internal');
}

/**
 * The checks that need no DNS, run when an endpoint is saved and again before each delivery. A host name that
 * passes is checked once more, address by address, when it is resolved (safeLookup).
 */
export function checkTargetUrl(raw: string, options: TargetOptions): URL {
  if (raw.length > MAX_URL_LENGTH) throw new UnsafeTarget(`is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeTarget('is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UnsafeTarget('scheme must be http or https');
  if (url.username !== '' || url.password !== '') throw new UnsafeTarget('has credentials');
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0) {
    if (isRefusedAddress(host, options)) throw new UnsafeTarget('is a private or reserved address');
    return url;
  }
  // A fully qualified name may end in a dot, which resolves the same as without it.
  const name = host.replace(/\.+$/, '');
  if (isInternalName(name) || (isLoopbackName(name) && !options.allowLoopback)) {
    throw new UnsafeTarget('is a private host name');
  }
  return url;
}

/**
 * A `lookup` for http.request that refuses a host if any of its addresses is refused, and otherwise hands the socket
 * exactly the addresses it checked. Checking at connect time, on the very answer used to connect, is what defeats DNS
 * rebinding: a name cannot pass a check with a public address and then connect to a private one. Refusing when only
 * one address is bad keeps the socket's own fallback between addresses from ever reaching a private one.
 */
export function safeLookup(options: TargetOptions): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) {
        callback(error, '');
        return;
      }
      const [first] = addresses;
      // getaddrinfo reports an error rather than an empty answer, but a throw here would escape into the event loop.
      if (first === undefined) {
        callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
        return;
      }
      if (addresses.some(({ address }) => isRefusedAddress(address, options))) {
        callback(new UnsafeTarget(`${hostname} resolves to a private or reserved address`), '');
        return;
      }
      if (lookupOptions.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}
