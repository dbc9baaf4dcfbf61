import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

const ONE_YEAR_SECONDS = 365 * 86400;

/**
 * Helmet's headers, set for an API that answers JSON: nothing in an answer may load, run or be framed, even if a
 * browser is made to render one as a page. /docs replaces the policy with one its page can work under (openapi.ts).
 */
export async function installSecurityHeaders(app: FastifyInstance): Promise<void> {
  await app.register(helmet, {
    contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    // Always sent: browsers ignore it over plain HTTP (RFC 6797, 8.1), so local use is unaffected, and behind a
    // TLS proxy it works without another setting. Not for subdomains: this server does not know what runs there.
    strictTransportSecurity: { maxAge: ONE_YEAR_SECONDS, includeSubDomains: false },
  });
}
