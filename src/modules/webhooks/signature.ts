import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Signatures as Standard Webhooks defines them (https://www.standardwebhooks.com/), so receivers can verify with
 * that project's libraries in any language, or with a few lines of their own.
 */

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: 32 random bytes, base64, behind the prefix that marks it as a webhook secret. */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return Buffer.from(encoded, 'base64');
}

function digest(secret: string, id: string, timestamp: string | number, body: string): string {
  return createHmac('sha256', secretKey(secret)).update(`${id}.${timestamp}.${body}`).digest('base64');
}

/** The `webhook-signature` header value: HMAC-SHA256 over the id, timestamp and body, so none can be swapped. */
export function signPayload(secret: string, id: string, timestampSeconds: number, body: string): string {
  return `v1,${digest(secret, id, timestampSeconds, body)}`;
}

/**
 * What a receiver does with the three `webhook-*` headers and the raw body. The header may list several
 * signatures (while a secret is rotated, one per secret); one match is enough. The timestamp window stops an
 * intercepted delivery from being replayed later.
 */
export function verifySignature(
  secret: string,
  headers: { id: string; timestamp: string; signature: string },
  body: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): boolean {
  if (!/^\d{1,15}$/.test(headers.timestamp)) return false;
  if (Math.abs(nowSeconds - Number(headers.timestamp)) > toleranceSeconds) return false;
  const expected = Buffer.from(digest(secret, headers.id, headers.timestamp, body));
  return headers.signature.split(' ').some((entry) => {
    if (!entry.startsWith('v1,')) return false;
    const given = Buffer.from(entry.slice('v1,'.length));
    // Constant time, so response timings cannot reveal a valid signature byte by byte.
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}
