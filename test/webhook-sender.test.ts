import { createHmac } from 'node:crypto';
import type { LookupAddress } from 'node:dns';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sendWebhook } from '../src/modules/webhooks/send.js';
import { newWebhookSecret, signPayload, verifySignature } from '../src/modules/webhooks/signature.js';
import { checkTargetUrl, isRefusedAddress, safeLookup, UnsafeTarget } from '../src/modules/webhooks/target.js';
import { fakeDns } from './support/fake-dns.js';

vi.mock('node:dns', async (importOriginal) => {
  const { withFakeLookup } = await import('./support/fake-dns.js');
  return withFakeLookup(await importOriginal<typeof import('node:dns')>());
});

const strict = { allowLoopback: false };
const loose = { allowLoopback: true };

describe('isRefusedAddress', () => {
  const refusedEverywhere = [
    '0.0.0.0',
    '0.1.2.3',
    '10.1.2.3',
    '100.64.0.1',
    '100.127.255.254',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.0.0.8',
    '192.168.1.1',
    '198.18.0.1',
    '198.19.255.255',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '255.255.255.255',
    '::',
    '::a00:1',
    'fc00::1',
    'fd00:ec2::254',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b::10.0.0.1',
    '2002:a00:1::',
    'not an address',
    '',
  ];
  /** An address inside every entry of the special-purpose registries that is not globally reachable, and the rest. */
  const specialPurpose: Array<[string, string]> = [
    ['0.0.0.1', '"this network" 0.0.0.0/8, RFC 791'],
    ['100.64.0.0', 'shared address space 100.64.0.0/10, RFC 6598'],
    ['192.0.0.1', 'service continuity 192.0.0.0/29, RFC 7335'],
    ['192.0.0.9', 'PCP anycast 192.0.0.9, RFC 7723, inside IETF protocol assignments'],
    ['192.0.0.170', 'NAT64 discovery 192.0.0.170, RFC 8880'],
    ['192.0.0.255', 'IETF protocol assignments 192.0.0.0/24, RFC 6890'],
    ['192.0.2.1', 'documentation 192.0.2.0/24, RFC 5737'],
    ['192.88.99.2', '6to4 relay anycast 192.88.99.0/24, RFC 7526'],
    ['198.51.100.7', 'documentation 198.51.100.0/24, RFC 5737'],
    ['203.0.113.255', 'documentation 203.0.113.0/24, RFC 5737'],
    ['::', 'unspecified ::/128, RFC 4291'],
    ['::ffff:0:808:808', 'IPv4-translated ::ffff:0:0:0/96, RFC 2765'],
    ['::ffff:0:10.0.0.1', 'IPv4-translated ::ffff:0:0:0/96, RFC 2765, dotted'],
    ['64:ff9b:1::808:808', 'local-use translation 64:ff9b:1::/48, RFC 8215'],
    ['100::1', 'discard-only 100::/64, RFC 6666'],
    ['100:0:0:1::1', 'dummy prefix 100:0:0:1::/64, RFC 9780'],
    ['2001::1', 'Teredo 2001::/32, RFC 4380'],
    ['2001:2::1', 'benchmarking 2001:2::/48, RFC 5180'],
    ['2001:10::1', 'ORCHID 2001:10::/28, RFC 4843'],
    ['2001:1ff:ffff::1', 'IETF protocol assignments 2001::/23, RFC 2928'],
    ['2001:db8::1', 'documentation 2001:db8::/32, RFC 3849'],
    ['3fff::1', 'documentation 3fff::/20, RFC 9637'],
    ['5f00::1', 'SRv6 SIDs 5f00::/16, RFC 9602'],
    ['fec0::1', 'site-local fec0::/10, RFC 3879'],
    ['4000::1', 'reserved by the IETF, outside global unicast 2000::/3'],
    ['::ffff:192.0.2.1', 'IPv4-mapped, judged by its IPv4 address'],
    ['::ffff:c633:6407', 'IPv4-mapped in hexadecimal, judged by its IPv4 address'],
    ['64:ff9b::203.0.113.1', 'NAT64, judged by its IPv4 address'],
    ['64:ff9b::6440:1', 'NAT64 of shared address space, judged by its IPv4 address'],
    ['2002:c000:201::1', '6to4 of documentation, judged by its IPv4 address'],
  ];
  const loopbacks = ['127.0.0.1', '127.255.255.254', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::7f00:1', '2002:7f00:1::'];
  const publics = [
    '1.1.1.1',
    '8.8.8.8',
    '93.184.215.14',
    '100.63.255.255',
    '100.128.0.1',
    '172.15.255.255',
    '172.32.0.1',
    '198.17.255.255',
    '198.20.0.1',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
    '192.31.196.1',
    '192.52.193.1',
    '192.175.48.1',
    '192.0.3.1',
    '198.51.99.255',
    '203.0.114.1',
    '2620:4f:8000::1',
    '2001:200::1',
    '2a00:1450:4001:80b::200e',
  ];

  it.each(refusedEverywhere)('refuses %s, loopback allowed or not', (address) => {
    expect(isRefusedAddress(address, strict)).toBe(true);
    expect(isRefusedAddress(address, loose)).toBe(true);
  });

  it.each(specialPurpose)('refuses %s (%s), loopback allowed or not', (address) => {
    expect(isRefusedAddress(address, strict)).toBe(true);
    expect(isRefusedAddress(address, loose)).toBe(true);
  });

  it.each(loopbacks)('refuses loopback %s unless loopback is allowed', (address) => {
    expect(isRefusedAddress(address, strict)).toBe(true);
    expect(isRefusedAddress(address, loose)).toBe(false);
  });

  it.each(publics)('allows public %s', (address) => {
    expect(isRefusedAddress(address, strict)).toBe(false);
  });
});

describe('checkTargetUrl', () => {
  // Whatever the reason, a host is only ever "not allowed".
  const notAllowed = 'has a host that is not allowed';
  const refused: Array<[string, string]> = [
    ['http://[::ffff:127.0.0.1]/', notAllowed],
    ['http://169.254.169.254/latest/meta-data', notAllowed],
    // WHATWG URL parsing turns the hexadecimal form into 127.0.0.1, so it is caught as that.
    ['http://0x7f000001/', notAllowed],
    ['http://2130706433/', notAllowed],
    ['http://10.1.2.3', notAllowed],
    ['http://[fd00:ec2::254]/', notAllowed],
    ['http://192.0.2.1/', notAllowed],
    ['http://[2001:db8::1]/', notAllowed],
    ['http://[64:ff9b:1::1]/', notAllowed],
    ['http://localhost:3000/hook', notAllowed],
    ['http://api.localhost/', notAllowed],
    ['http://localhost./', notAllowed],
    ['http://metadata.google.internal/computeMetadata/v1/', notAllowed],
    ['http://ip-10-0-0-1.ec2.internal/', notAllowed],
    ['ftp://example.com/', 'scheme must be http or https'],
    ['file:///etc/passwd', 'scheme must be http or https'],
    ['https://user:pass@example.com/', 'has credentials'],
    ['https://user@example.com/', 'has credentials'],
    ['example.com/hook', 'is not a valid URL'],
    [`https://example.com/${'a'.repeat(2_000)}`, 'is longer than 2000 characters'],
  ];

  it.each(refused)('refuses %s', (raw, reason) => {
    expect(() => checkTargetUrl(raw, strict)).toThrow(UnsafeTarget);
    expect(() => checkTargetUrl(raw, strict)).toThrow(new UnsafeTarget(reason));
  });

  it.each(['https://example.com', 'http://example.com:8080/hooks?x=1', 'https://93.184.215.14/', 'https://[2606:4700:4700::1111]/'])(
    'allows %s',
    (raw) => {
      expect(checkTargetUrl(raw, strict)).toBeInstanceOf(URL);
    },
  );

  it('allows loopback, and only loopback, when told to', () => {
    for (const raw of ['http://127.0.0.1:8080/', 'http://[::1]/', 'http://localhost/', 'http://[::ffff:127.0.0.1]/']) {
      expect(checkTargetUrl(raw, loose).href).toBe(new URL(raw).href);
    }
    for (const raw of ['http://10.0.0.1/', 'http://169.254.169.254/', 'http://metadata.google.internal/', 'http://192.168.0.1/']) {
      expect(() => checkTargetUrl(raw, loose)).toThrow(UnsafeTarget);
    }
  });
});

describe('safeLookup', () => {
  const lookup = (options: { allowLoopback: boolean }, all: boolean) =>
    new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[] }>((resolve) => {
      safeLookup(options)('localhost', { all }, (error, address) => resolve({ error, address }));
    });

  it('fails the connection when the name resolves to loopback', async () => {
    const { error } = await lookup(strict, false);
    expect(error).toBeInstanceOf(UnsafeTarget);
    expect(error?.code).toBe('EUNSAFETARGET');
    expect(error?.message).toBe('has a host that is not allowed');
  });

  it('hands over the checked addresses, one or all as asked, when they are allowed', async () => {
    const one = await lookup(loose, false);
    expect(one.error).toBeNull();
    expect(typeof one.address === 'string' && isRefusedAddress(one.address, strict)).toBe(true);
    const all = await lookup(loose, true);
    expect(all.error).toBeNull();
    expect(Array.isArray(all.address) && all.address.length > 0).toBe(true);
  });
});

describe('signatures', () => {
  const secret = newWebhookSecret();
  const id = 'msg_2a8c';
  const now = 1_750_000_000;
  const body = '{"event":"article.created","article":{"slug":"hello"}}';
  const signature = signPayload(secret, id, now, body);
  const headers = { id, timestamp: String(now), signature };

  it('makes whsec_ secrets of 32 random bytes', () => {
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(newWebhookSecret()).not.toBe(secret);
  });

  it('matches the definition: base64 HMAC-SHA256 over "id.timestamp.body", keyed with the decoded secret', () => {
    const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
      .update(`${id}.${now}.${body}`)
      .digest('base64');
    expect(signature).toBe(`v1,${expected}`);
  });

  it('reproduces the example that the Standard Webhooks libraries test against', () => {
    expect(signPayload('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')).toBe(
      'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    );
  });

  it('verifies its own signature, alone or among others', () => {
    expect(verifySignature(secret, headers, body, now)).toBe(true);
    expect(verifySignature(secret, headers, body, now + 299)).toBe(true);
    const rotated = `${signPayload(newWebhookSecret(), id, now, body)} ${signature}`;
    expect(verifySignature(secret, { ...headers, signature: rotated }, body, now)).toBe(true);
  });

  it('rejects a tampered body, a wrong secret, another id, a stale or future timestamp, a malformed header', () => {
    expect(verifySignature(secret, headers, body.replace('hello', 'hell0'), now)).toBe(false);
    expect(verifySignature(newWebhookSecret(), headers, body, now)).toBe(false);
    expect(verifySignature(secret, { ...headers, id: 'msg_other' }, body, now)).toBe(false);
    expect(verifySignature(secret, headers, body, now + 301)).toBe(false);
    expect(verifySignature(secret, headers, body, now - 301)).toBe(false);
    expect(verifySignature(secret, headers, body, now + 60, 30)).toBe(false);
    expect(verifySignature(secret, { ...headers, timestamp: `${now}.5` }, body, now)).toBe(false);
    expect(verifySignature(secret, { ...headers, signature: signature.replace('v1,', 'v2,') }, body, now)).toBe(false);
    expect(verifySignature(secret, { ...headers, signature: signature.slice(3) }, body, now)).toBe(false);
    expect(verifySignature(secret, { ...headers, signature: '' }, body, now)).toBe(false);
  });
});

describe('sendWebhook', () => {
  const secret = newWebhookSecret();
  const message = { id: 'msg_1', timestampSeconds: Math.floor(Date.now() / 1000), body: '{"event":"ping"}' };
  const options = { timeoutMs: 1_000, maxResponseBytes: 1_024, allowLoopback: true, userAgent: 'Conduit-Webhooks/test' };
  const servers: Server[] = [];

  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  /** A receiver on 127.0.0.1 that records each request with its body before handing it to `handle`. */
  async function receiver(handle: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
    const requests: Array<{ headers: IncomingMessage['headers']; url: string | undefined; body: string }> = [];
    let connections = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        requests.push({ headers: req.headers, url: req.url, body });
        handle(req, res, body);
      });
    });
    server.on('connection', () => connections++);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}/hooks`, port, requests, connections: () => connections };
  }

  it('POSTs the signed message and reports a 2xx as ok', async () => {
    const target = await receiver((_req, res) => res.end('thanks'));
    const result = await sendWebhook(target.url, message, secret, options);
    expect(result).toMatchObject({ ok: true, status: 200, error: null });
    expect(result.latencyMs).toBeGreaterThanOrEqual(0);
    const [received] = target.requests;
    expect(received?.url).toBe('/hooks');
    expect(received?.body).toBe(message.body);
    expect(received?.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'Conduit-Webhooks/test',
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(message.timestampSeconds),
    });
    const headers = {
      id: String(received?.headers['webhook-id']),
      timestamp: String(received?.headers['webhook-timestamp']),
      signature: String(received?.headers['webhook-signature']),
    };
    expect(verifySignature(secret, headers, received!.body, message.timestampSeconds)).toBe(true);
  });

  it('reports a 500 as a failure with its status', async () => {
    const target = await receiver((_req, res) => {
      res.statusCode = 500;
      res.end('oops');
    });
    expect(await sendWebhook(target.url, message, secret, options)).toMatchObject({ ok: false, refused: false, status: 500, error: null });
  });

  it('does not follow a redirect', async () => {
    const target = await receiver((_req, res) => {
      res.writeHead(302, { location: '/elsewhere' }).end();
    });
    const result = await sendWebhook(target.url, message, secret, options);
    expect(result).toMatchObject({ ok: false, status: 302, error: 'redirect not followed' });
    expect(target.requests.map(({ url }) => url)).toEqual(['/hooks']);
  });

  it('gives up on a receiver that never answers after timeoutMs', async () => {
    const target = await receiver(() => {});
    const result = await sendWebhook(target.url, message, secret, { ...options, timeoutMs: 200 });
    expect(result).toMatchObject({ ok: false, status: null, error: 'timeout' });
    expect(result.latencyMs).toBeGreaterThanOrEqual(190);
    expect(result.latencyMs).toBeLessThan(700);
  });

  it('counts a body that stops coming against the same timeout, keeping the status', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).write('partial'));
    const result = await sendWebhook(target.url, message, secret, { ...options, timeoutMs: 200 });
    expect(result).toMatchObject({ ok: false, status: 200, error: 'timeout' });
  });

  it('stops reading a streamed answer past maxResponseBytes', async () => {
    const target = await receiver((_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 4; i++) res.write(Buffer.alloc(16 * 1_024, 'x'));
    });
    expect(await sendWebhook(target.url, message, secret, options)).toMatchObject({ ok: false, status: 200, error: 'response too large' });
  });

  it('refuses an answer whose declared length is over maxResponseBytes without waiting for it', async () => {
    // Only the headers ever come: waiting for the body would end in a timeout instead.
    const target = await receiver((_req, res) => res.writeHead(200, { 'content-length': 1_024 * 1_024 }).flushHeaders());
    const result = await sendWebhook(target.url, message, secret, { ...options, timeoutMs: 5_000 });
    expect(result).toMatchObject({ ok: false, status: 200, error: 'response too large' });
    expect(result.latencyMs).toBeLessThan(1_000);
  });

  it('reports a refused connection', async () => {
    const target = await receiver(() => {});
    const server = servers.pop()!;
    await new Promise((resolve) => server.close(resolve));
    expect(await sendWebhook(target.url, message, secret, options)).toMatchObject({
      ok: false,
      refused: false,
      status: null,
      error: 'connection refused',
    });
  });

  it('connects to the address the lookup checked', async () => {
    const target = await receiver((_req, res) => res.end());
    fakeDns.set('hooks.example.test', ['127.0.0.1']);
    const result = await sendWebhook(`http://hooks.example.test:${target.port}/hooks`, message, secret, options);
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(target.requests[0]?.headers.host).toBe(`hooks.example.test:${target.port}`);
  });

  it('refuses a name when any of its addresses is private, without connecting', async () => {
    const target = await receiver((_req, res) => res.end());
    fakeDns.set('rebound.example.test', ['93.184.215.14', '127.0.0.1']);
    const result = await sendWebhook(`http://rebound.example.test:${target.port}/`, message, secret, { ...options, allowLoopback: false });
    expect(result).toEqual({ ok: false, refused: true, status: null, latencyMs: null, error: 'host not found or not allowed' });
    expect(target.connections()).toBe(0);
  });

  it('tells an internal name from a nonexistent one in nothing, not even the time the lookup took', async () => {
    fakeDns.set('intranet.example.test', ['10.20.30.40']);
    fakeDns.set('nowhere.example.test', 'nonexistent');
    const strictOptions = { ...options, allowLoopback: false };
    const internal = await sendWebhook('https://intranet.example.test/hook', message, secret, strictOptions);
    const nonexistent = await sendWebhook('https://nowhere.example.test/hook', message, secret, strictOptions);
    expect(internal).toEqual({ ok: false, refused: true, status: null, latencyMs: null, error: 'host not found or not allowed' });
    expect(nonexistent).toEqual(internal);
  });

  it('turns a request that cannot even be written into a result', async () => {
    const target = await receiver((_req, res) => res.end());
    const result = await sendWebhook(target.url, { ...message, id: 'msg_1\r\nx-injected: 1' }, secret, options);
    expect(result).toMatchObject({ ok: false, status: null, error: 'request failed: ERR_INVALID_CHAR' });
    expect(target.connections()).toBe(0);
  });

  it('refuses an unsafe target without connecting to it', async () => {
    const target = await receiver((_req, res) => res.end());
    const strictOptions = { ...options, allowLoopback: false };
    for (const url of [target.url, `http://localhost:${target.port}/`, `ftp://127.0.0.1:${target.port}/`]) {
      const result = await sendWebhook(url, message, secret, strictOptions);
      expect(result).toEqual({ ok: false, refused: true, status: null, latencyMs: null, error: 'host not found or not allowed' });
    }
    expect(target.connections()).toBe(0);
  });
});
