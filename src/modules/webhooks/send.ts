import { type ClientRequest, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { signPayload } from './signature.js';
import { checkTargetUrl, safeLookup, UnsafeTarget } from './target.js';

/** What one delivery attempt came to, in a form fit to store and to show to the endpoint's owner. */
export interface DeliveryResult {
  /** The endpoint answered 2xx, within the time and size limits. */
  ok: boolean;
  /**
   * The host is not allowed, or its name does not resolve: nothing to try again. The two are one outcome, with one
   * text and no latency, so that the log does not tell the endpoint's owner which internal names exist.
   */
  refused: boolean;
  status: number | null;
  latencyMs: number | null;
  /** A short reason when the attempt failed for something other than its status; never a stack or an address. */
  error: string | null;
}

interface SendOptions {
  /** The whole attempt, from resolving the host to the last byte of the answer. */
  timeoutMs: number;
  /** Endpoints owe us a status, not a body; an endless one must not hold the worker. */
  maxResponseBytes: number;
  allowLoopback: boolean;
  userAgent: string;
}

const SOCKET_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ETIMEDOUT: 'timeout',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

const TARGET_REFUSED = 'host not found or not allowed';

/**
 * A short, stable text for a failure. Messages are left out: they carry resolved addresses, which would tell an
 * endpoint's owner about the network the server runs in.
 */
function describeFailure(error: unknown): string {
  if (error instanceof UnsafeTarget) return TARGET_REFUSED;
  // With several addresses to try, a connection reports every attempt's error at once; the first says enough.
  const cause = error instanceof AggregateError && !('code' in error) ? error.errors[0] : error;
  const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : '';
  // An internal name resolves, to an address refused above; a made-up one does not: both must read the same.
  if (code === 'ENOTFOUND') return TARGET_REFUSED;
  if (code in SOCKET_ERRORS) return SOCKET_ERRORS[code]!;
  // Certificate problems all have codes of their own and are worth telling apart.
  if (/CERT|TLS|SSL/.test(code)) return `tls error: ${code}`;
  return code === '' ? 'request failed' : `request failed: ${code}`;
}

/**
 * Delivers one signed message with a single POST. Never throws and never follows a redirect (a redirect could
 * point anywhere, past every check on the endpoint's URL); every outcome is a DeliveryResult.
 */
export async function sendWebhook(
  target: string,
  message: { id: string; timestampSeconds: number; body: string },
  secret: string,
  options: SendOptions,
): Promise<DeliveryResult> {
  const started = performance.now();
  const result = (status: number | null, error: string | null): DeliveryResult => {
    const refused = error === TARGET_REFUSED;
    return {
      ok: error === null && status !== null && status >= 200 && status < 300,
      refused,
      status,
      // How long a lookup took would tell an internal name from a made-up one as well.
      latencyMs: refused ? null : Math.round(performance.now() - started),
      error,
    };
  };

  let url: URL;
  try {
    // Again here: the URL was checked when saved, but the rules may have tightened since (allowLoopback turned off).
    url = checkTargetUrl(target, options);
  } catch (error) {
    return result(null, describeFailure(error));
  }

  return new Promise((resolve) => {
    let status: number | null = null;
    let settled = false;
    const settle = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result(status, error));
      // Whatever is left of the exchange is of no use; closing also cuts off a receiver that is still sending.
      req?.destroy();
    };
    const timer = setTimeout(() => settle('timeout'), options.timeoutMs);

    let req: ClientRequest | undefined;
    try {
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      req = send(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(message.body),
          'user-agent': options.userAgent,
          'webhook-id': message.id,
          'webhook-timestamp': String(message.timestampSeconds),
          'webhook-signature': signPayload(secret, message.id, message.timestampSeconds, message.body),
        },
        lookup: safeLookup(options),
        // A socket of its own: a pooled one could carry this request to a host another endpoint's lookup approved.
        agent: false,
      });
    } catch (error) {
      // A header value with a line break in it, say, is refused before anything is sent.
      settle(describeFailure(error));
      return;
    }

    req.on('error', (error) => settle(describeFailure(error)));
    req.on('response', (res) => {
      status = res.statusCode ?? null;
      res.on('error', (error) => settle(describeFailure(error)));
      if (Number(res.headers['content-length']) > options.maxResponseBytes) {
        settle('response too large');
        return;
      }
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > options.maxResponseBytes) settle('response too large');
      });
      res.on('end', () => settle(status !== null && status >= 300 && status < 400 ? 'redirect not followed' : null));
    });
    req.end(message.body);
  });
}
