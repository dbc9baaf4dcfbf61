import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * OWASP's device cookie against lockout as denial of service: each successful login hands the client a signed value
 * naming the account and this device, and a login that sends it back is counted against that device's own budget
 * instead of the account's. Strangers' failures can then lock the account for strangers only, and a stolen value is
 * one more budget of guesses, not a way around the limit.
 *
 * It travels two ways. A cookie (HttpOnly, SameSite=Strict, sent back to the login route only) serves browsers that
 * use the API on their own origin. Frontends on another origin send no cookies (CORS here allows no credentials), so
 * the value also comes in the `Known-Device` response header, which such a client keeps and sends back as a request
 * header of that name; one that does not is counted like a stranger.
 */
export const KNOWN_DEVICE_HEADER = 'known-device';
/** Longer than any value handed out (about 90 characters); a longer one is refused with 422 before it is read. */
export const KNOWN_DEVICE_MAX_LENGTH = 256;
const COOKIE = 'conduit_device';
const COOKIE_PATH = '/api/users/login';

export interface DeviceHolder {
  id: number;
  token_version: number;
}

export interface KnownDevices {
  /**
   * The id of the device the login comes from, when it sends a value that is well signed, unexpired, and for the
   * account as it is now: the same id (an email that changed hands is another account) and token version (a password
   * change forgets every device). `account` is read only for a well-signed value.
   */
  recognise(request: FastifyRequest, account: () => Promise<DeviceHolder | undefined>): Promise<string | null>;
  /** A new value for a successful login, as a header and as a cookie. */
  remember(request: FastifyRequest, reply: FastifyReply, account: DeviceHolder): void;
}

/** `userId.tokenVersion.deviceId.expiresAt.signature`, the expiry in seconds since the epoch. */
const VALUE = /^((0|[1-9]\d{0,14})\.(0|[1-9]\d{0,14})\.([\w-]{22})\.([1-9]\d{0,14}))\.([\w-]{43})$/;

function cookieValue(header: string | undefined): string | undefined {
  for (const pair of header?.split(';') ?? []) {
    const [name, value] = pair.split('=', 2).map((part) => part.trim());
    if (name === COOKIE) return value;
  }
  return undefined;
}

export function createKnownDevices(secret: string, ttlSeconds: number): KnownDevices {
  // A key of its own, so that no value signed for one use (a token, a device) ever passes for the other.
  const key = createHmac('sha256', secret).update('conduit known device').digest();
  const signature = (claims: string) => createHmac('sha256', key).update(claims).digest();

  function read(value: string | undefined) {
    const match = value === undefined ? null : VALUE.exec(value);
    if (match === null) return null;
    const [, claims = '', userId, version, deviceId = '', expiresAt, sent = ''] = match;
    // Compared as text: decoding would ignore the last character's spare bits, letting several spellings pass.
    const expected = Buffer.from(signature(claims).toString('base64url'));
    const given = Buffer.from(sent);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    if (Number(expiresAt) * 1000 <= Date.now()) return null;
    return { userId: Number(userId), version: Number(version), deviceId };
  }

  return {
    async recognise(request, account) {
      const header = request.headers[KNOWN_DEVICE_HEADER];
      const device = read(typeof header === 'string' ? header : cookieValue(request.headers.cookie));
      if (device === null) return null;
      const holder = await account();
      return holder?.id === device.userId && holder.token_version === device.version ? device.deviceId : null;
    },

    remember(request, reply, account) {
      const expiresAt = Math.floor(Date.now() / 1000) + ttlSeconds;
      const claims = `${account.id}.${account.token_version}.${randomBytes(16).toString('base64url')}.${expiresAt}`;
      const value = `${claims}.${signature(claims).toString('base64url')}`;
      const secure = request.protocol === 'https' ? '; Secure' : '';
      reply.header(KNOWN_DEVICE_HEADER, value);
      reply.header('set-cookie', `${COOKIE}=${value}; Path=${COOKIE_PATH}; Max-Age=${ttlSeconds}; HttpOnly; SameSite=Strict${secure}`);
    },
  };
}
