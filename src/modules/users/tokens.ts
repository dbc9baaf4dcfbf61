import { randomBytes } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
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

export function createTokenService(secret: string, ttlSeconds: number): TokenService {
  const key = new TextEncoder().encode(secret);
  return {
    issue(user) {
      return new SignJWT({ ver: user.token_version })
        .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
        .setSubject(String(user.id))
        .setJti(randomBytes(12).toString('base64url'))
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
        .sign(key);
    },

    async verify(token) {
      let payload;
      try {
        // The algorithm is pinned: "none" and every asymmetric trick are refused before the signature check.
        ({ payload } = await jwtVerify(token, key, { algorithms: [ALGORITHM], requiredClaims: ['sub', 'exp', 'jti'] }));
      } catch (error) {
        throw unauthorized(error instanceof errors.JWTExpired ? 'has expired' : 'is invalid');
      }
      const userId = Number(payload.sub);
      const version = payload.ver;
      if (!Number.isSafeInteger(userId) || userId < 1 || typeof version !== 'number' || typeof payload.jti !== 'string') {
        throw unauthorized('is invalid');
      }
      return { userId, version, sessionId: payload.jti };
    },
  };
}
