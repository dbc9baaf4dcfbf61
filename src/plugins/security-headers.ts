import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';

const ONE_YEAR_SECONDS = 365 * 86400;

/**
 * Helmet's headers, set for an API that answers JSON: nothing in an answer may load, run or be framed, even if a
 * browser is made to render one as a page. /docs replaces the policy with one its page can work under (openapi.ts).
 */
const POLICY: HelmetOptions = {
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  // Always sent: browsers ignore it over plain HTTP (RFC 6797, 8.1), so local use is unaffected, and behind a
  // TLS proxy it works without another setting. Not for subdomains: this server does not know what runs there.
  strictTransportSecurity: { maxAge: ONE_YEAR_SECONDS, includeSubDomains: false },
};

/**
 * The headers helmet would set, worked out once: the policy is the same for every response, and building
 * helmet's middleware per request (as its Fastify wrapper does) parsed the policy again on each one.
 */
function headersOf(options: HelmetOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  const recorder = {
    setHeader: (name: string, value: unknown) => (headers[name.toLowerCase()] = String(value)),
    removeHeader: (name: string) => delete headers[name.toLowerCase()],
  };
  helmet(options)({} as IncomingMessage, recorder as unknown as ServerResponse, (error?: unknown) => {
    if (error) throw error;
  });
  return headers;
}

export function installSecurityHeaders(app: FastifyInstance): void {
  const headers = headersOf(POLICY);
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers);
    done();
  });
}
