import { randomBytes } from 'node:crypto';
import { errors, type JWTPayload, jwtVerify, SignJWT } from 'jose';
import { setWithin } from '../../bounded-map.js';
import { unauthorized } from '../../errors.js';

const ALGORITHM = 'HS256';

export interface TokenClaims {
  userId: number;
  /** The user's token_version when the token was issued; a password change bumps it. */
  version: number;
  /** Identifies this session, so the session that changed the password can be kept. */
  sessionId: string;
}

export interface TokenService {
  issue(user: { id: number; token_version: number }): Promise<string>;
  /** Verifies signature, algorithm and expiry; throws the contract's 401 otherwise. */
  verify(token: string): Promise<TokenClaims>;
}

/** Distinct tokens remembered as verified; a busy instance sees far fewer signed-in clients at once. */
const VERIFIED_TOKENS = 10_000;

export function createTokenService(secret: string, ttlSeconds: number): TokenService {
  // Imported once: given raw bytes, jose imports the key again through Web Crypto for every token it signs or checks.
  const key = crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
    'verify',
  ]);
  /**
   * A signature that verified once verifies forever under the same secret, so a token is checked with HMAC
   * once and then only for expiry; revocation is checked on every request against the user row (auth.ts).
   * Web Crypto (jose's HMAC) runs off the event loop, and that round trip dominated an authenticated read.
   */
  const verified = new Map<string, TokenClaims & { expiresAt: number }>();
  return {
    async issue(user) {
      return new SignJWT({ ver: user.token_version })
        .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
        .setSubject(String(user.id))
        .setJti(randomBytes(12).toString('base64url'))
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
        .sign(await key);
    },

    async verify(token) {
      const known = verified.get(token);
      if (known !== undefined) {
        if (Date.now() < known.expiresAt) return known;
        verified.delete(token);
        throw unauthorized('has expired');
      }
      let payload: JWTPayload;
      try {
        // The algorithm is pinned: "none" and every asymmetric trick are refused before the signature check.
        ({ payload } = await jwtVerify(token, await key, { algorithms: [ALGORITHM], requiredClaims: ['sub', 'exp', 'jti'] }));
      } catch (error) {
        throw unauthorized(error instanceof errors.JWTExpired ? 'has expired' : 'is invalid');
      }
      const userId = Number(payload.sub);
      const version = payload.ver;
      if (!Number.isSafeInteger(userId) || userId < 1 || typeof version !== 'number' || typeof payload.jti !== 'string') {
        throw unauthorized('is invalid');
      }
      const claims = { userId, version, sessionId: payload.jti, expiresAt: payload.exp! * 1000 };
      setWithin(verified, VERIFIED_TOKENS, token, claims);
      return claims;
    },
  };
}
