import { lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * A webhook URL the server refuses to call. Users choose these URLs, so without the checks below anyone could make
 * the server send requests into its own network (server-side request forgery). Its `code` lets safeLookup fail a
 * connection with it like any other socket error. A refused host is only ever "not allowed": saying why (private,
 * reserved, resolved to where) would let the URL's owner map the server's network one name at a time.
 */
export class UnsafeTarget extends Error {
  readonly code = 'EUNSAFETARGET';
}

interface TargetOptions {
  /** For tests and local development: permits 127.0.0.0/8, ::1 and localhost, and nothing else private. */
  allowLoopback: boolean;
}

const MAX_URL_LENGTH = 2_000;
const HOST_NOT_ALLOWED = 'has a host that is not allowed';

type Range = readonly [network: string, prefix: number];

const blockListOf = (ipv4: readonly Range[], ipv6: readonly Range[]) => {
  const list = new BlockList();
  for (const [network, prefix] of ipv4) list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of ipv6) list.addSubnet(network, prefix, 'ipv6');
  return list;
};

// RFC 1122 §3.2.1.3 (127.0.0.0/8) and RFC 4291 §2.5.3 (::1): refused unless allowLoopback.
const loopback = blockListOf([['127.0.0.0', 8]], [['::1', 128]]);

/**
 * Every entry of the IANA IPv4 Special-Purpose Address Registry that is not globally reachable, plus multicast and
 * the reserved space: this host, its private networks, the cloud metadata services (169.254.169.254 is link-local)
 * and addresses that reach no one. Allowed, being globally reachable: AS112 (192.31.196.0/24, RFC 7535;
 * 192.175.48.0/24, RFC 7534) and AMT (192.52.193.0/24, RFC 7450).
 */
const IPV4_REFUSED: readonly Range[] = [
  ['0.0.0.0', 8], // "this network", RFC 791 §3.2, with "this host" 0.0.0.0/32 (RFC 1122 §3.2.1.3), which reaches the local host
  ['10.0.0.0', 8], // private use, RFC 1918
  ['100.64.0.0', 10], // shared address space (carrier-grade NAT), RFC 6598
  ['169.254.0.0', 16], // link local, RFC 3927
  ['172.16.0.0', 12], // private use, RFC 1918
  // IETF protocol assignments, RFC 6890 §2.1: service continuity 192.0.0.0/29 (RFC 7335), the dummy 192.0.0.8
  // (RFC 7600), NAT64 discovery 192.0.0.170-171 (RFC 8880). Its two globally reachable anycast addresses (PCP
  // 192.0.0.9, RFC 7723; TURN 192.0.0.10, RFC 8155) are no webhook receiver either, so the whole block goes.
  ['192.0.0.0', 24],
  ['192.0.2.0', 24], // documentation TEST-NET-1, RFC 5737
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast, RFC 7526, with the 6a44 relay 192.88.99.2 (RFC 6751)
  ['192.168.0.0', 16], // private use, RFC 1918
  ['198.18.0.0', 15], // benchmarking, RFC 2544
  ['198.51.100.0', 24], // documentation TEST-NET-2, RFC 5737
  ['203.0.113.0', 24], // documentation TEST-NET-3, RFC 5737
  ['224.0.0.0', 4], // multicast, RFC 5771
  ['240.0.0.0', 4], // reserved, RFC 1112 §4, with the limited broadcast 255.255.255.255 (RFC 8190, RFC 919 §7)
];

/**
 * The same for the IANA IPv6 Special-Purpose Address Registry, plus multicast and the deprecated site-local
 * block. Judged by the IPv4 address inside them instead (embeddedIpv4): IPv4-mapped ::ffff:0:0/96 (RFC 4291
 * §2.5.5.2), which a dual-stack socket connects to over IPv4; NAT64's well-known 64:ff9b::/96 (RFC 6052, globally
 * reachable); 6to4 2002::/16 (RFC 3056). Allowed, being globally reachable: AS112 2620:4f:8000::/48 (RFC 7534).
 */
const IPV6_REFUSED: readonly Range[] = [
  ['::', 96], // unspecified ::/128 and the deprecated IPv4-compatible addresses, RFC 4291 §2.5.2 and §2.5.5.1
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT), RFC 2765 §2.1, dropped by RFC 6145: nothing legitimate uses it
  ['64:ff9b:1::', 48], // local-use IPv4/IPv6 translation, RFC 8215
  ['100::', 64], // discard-only, RFC 6666
  ['100:0:0:1::', 64], // dummy IPv6 prefix, RFC 9780
  // IETF protocol assignments, RFC 2928: Teredo 2001::/32 (RFC 4380), benchmarking 2001:2::/48 (RFC 5180), the
  // deprecated ORCHID 2001:10::/28 (RFC 4843). Its globally reachable entries (PCP, TURN and DNS-SD anycast
  // 2001:1::1-3, AMT 2001:3::/32, AS112 2001:4:112::/48, ORCHIDv2 2001:20::/28, drone tags 2001:30::/28) are no
  // webhook receiver either, so the whole block goes.
  ['2001::', 23],
  ['2001:db8::', 32], // documentation, RFC 3849
  ['3fff::', 20], // documentation, RFC 9637
  ['5f00::', 16], // SRv6 segment identifiers, RFC 9602
  ['fc00::', 7], // unique local, RFC 4193 (AWS's metadata service at fd00:ec2::254 among them)
  ['fe80::', 10], // link-local unicast, RFC 4291 §2.5.6
  ['fec0::', 10], // deprecated site-local, RFC 3879, still routed by some stacks
  ['ff00::', 8], // multicast, RFC 4291 §2.7
];

const refused = blockListOf(IPV4_REFUSED, IPV6_REFUSED);

/**
 * Global unicast, RFC 4291 §2.4: the IANA IPv6 address space reserves everything else to the IETF, so an address
 * outside it (beyond the embedded-IPv4 forms) is no public endpoint, whatever the registry adds there later.
 */
const globalUnicast = blockListOf([], [['2000::', 3]]);

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
  return refused.check(address, type) || (type === 'ipv6' && !globalUnicast.check(address, type));
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
    if (isRefusedAddress(host, options)) throw new UnsafeTarget(HOST_NOT_ALLOWED);
    return url;
  }
  // A fully qualified name may end in a dot, which resolves the same as without it.
  const name = host.replace(/\.+$/, '');
  if (isInternalName(name) || (isLoopbackName(name) && !options.allowLoopback)) {
    throw new UnsafeTarget(HOST_NOT_ALLOWED);
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
        callback(new UnsafeTarget(HOST_NOT_ALLOWED), '');
        return;
      }
      if (lookupOptions.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}
