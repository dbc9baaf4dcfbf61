import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | { kind: 'postgres'; url: string; poolSize: number };

export interface Config {
  env: 'development' | 'production' | 'test';
  host: string;
  port: number;
  logLevel: string;
  dataDir: string;
  database: DatabaseConfig;
  jwtSecret: string;
  /** Token lifetime in seconds. */
  jwtTtlSeconds: number;
  /** `true` allows any origin; otherwise the exact origins allowed. */
  corsOrigins: true | string[];
}

export class ConfigError extends Error {}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const MIN_SECRET_LENGTH = 32;
const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

type Env = Record<string, string | undefined>;

function parsePort(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`${name} must be a port number from 0 to 65535, got "${raw}"`);
  }
  return port;
}

function parsePositiveInt(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigError(`${name} must be a positive whole number, got "${raw}"`);
  }
  return value;
}

/** Accepts a number of seconds or a number with a unit: 90s, 15m, 12h, 30d. */
export function parseDuration(raw: string, name: string): number {
  const match = /^(\d+)\s*([smhd]?)$/.exec(raw.trim());
  const amount = match ? Number(match[1]) : NaN;
  const seconds = amount * (DURATION_UNITS[match?.[2] || 's'] ?? NaN);
  if (!Number.isSafeInteger(seconds) || seconds < 1) {
    throw new ConfigError(`${name} must be a duration such as 3600, 90m, 12h or 30d, got "${raw}"`);
  }
  return seconds;
}

function parseDatabase(raw: string | undefined, dataDir: string, env: Env): DatabaseConfig {
  if (raw === undefined || raw === '') {
    return { kind: 'sqlite', file: path.join(dataDir, 'conduit.db') };
  }
  if (raw.startsWith('sqlite:')) {
    const file = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') throw new ConfigError('DATABASE_URL "sqlite:" needs a file path, e.g. sqlite:./data/conduit.db');
    return { kind: 'sqlite', file: path.resolve(file) };
  }
  if (/^postgres(ql)?:\/\//.test(raw)) {
    try {
      new URL(raw);
    } catch {
      throw new ConfigError('DATABASE_URL is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url: raw, poolSize: parsePositiveInt(env.DATABASE_POOL_SIZE, 'DATABASE_POOL_SIZE', 10) };
  }
  throw new ConfigError('DATABASE_URL must start with sqlite: or postgres:// (unset uses ./data/conduit.db)');
}

/**
 * Outside production a missing secret is generated once and kept in the data folder, so a developer
 * needs no set-up and tokens still survive restarts. `wx` makes concurrent first starts agree on one file.
 */
function localSecret(dataDir: string): string {
  const file = path.join(dataDir, 'jwt-secret');
  mkdirSync(dataDir, { recursive: true });
  try {
    writeFileSync(file, randomBytes(48).toString('base64url'), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const secret = readFileSync(file, 'utf8').trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new ConfigError(`${file} holds a secret shorter than ${MIN_SECRET_LENGTH} characters; delete it to regenerate`);
  }
  return secret;
}

function parseCors(raw: string | undefined): true | string[] {
  if (raw === undefined || raw.trim() === '' || raw.trim() === '*') return true;
  const origins = raw.split(',').map((origin) => origin.trim()).filter(Boolean);
  for (const origin of origins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new ConfigError(`CORS_ORIGINS entries must look like https://example.com (no path), got "${origin}"`);
    }
  }
  return origins;
}

export function loadConfig(env: Env = process.env): Config {
  const nodeEnv = env.NODE_ENV ?? 'development';
  if (nodeEnv !== 'development' && nodeEnv !== 'production' && nodeEnv !== 'test') {
    throw new ConfigError(`NODE_ENV must be development, production or test, got "${nodeEnv}"`);
  }
  const logLevel = env.LOG_LEVEL ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }
  const dataDir = path.resolve(env.DATA_DIR || 'data');

  let jwtSecret = env.JWT_SECRET;
  if (jwtSecret === undefined || jwtSecret === '') {
    if (nodeEnv === 'production') {
      throw new ConfigError('JWT_SECRET is required when NODE_ENV=production (use at least 32 random characters)');
    }
    jwtSecret = localSecret(dataDir);
  } else if (jwtSecret.length < MIN_SECRET_LENGTH) {
    throw new ConfigError(`JWT_SECRET must be at least ${MIN_SECRET_LENGTH} characters long`);
  }

  return {
    env: nodeEnv,
    host: env.HOST || '127.0.0.1',
    port: parsePort(env.PORT, 'PORT', 3000),
    logLevel,
    dataDir,
    database: parseDatabase(env.DATABASE_URL, dataDir, env),
    jwtSecret,
    jwtTtlSeconds: env.JWT_EXPIRES_IN ? parseDuration(env.JWT_EXPIRES_IN, 'JWT_EXPIRES_IN') : 30 * 86400,
    corsOrigins: parseCors(env.CORS_ORIGINS),
  };
}
