import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { parseEnv } from 'node:util';

export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | {
      kind: 'postgres';
      url: string;
      poolSize: number;
      /** Waiting longer for a connection than this fails the request (503) instead of hanging while the database is down. */
      connectTimeoutMs: number;
    };

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
  /** Server processes sharing the port (`conduit serve`). */
  workers: number;
  /** Fastify's `trustProxy`: `false` for direct clients, else the proxy hops or addresses whose X-Forwarded-For is believed. */
  trustProxy: false | number | string[];
  rateLimits: RateLimitConfig;
  timeouts: TimeoutConfig;
  overload: OverloadConfig;
}

/** Counts are per window; a count of 0 turns that limit off. */
export interface RateLimitConfig {
  /** Requests per client address, on every route but the probes and /metrics. */
  max: number;
  windowMs: number;
  /** Failed logins per account (its lower-cased email). */
  authAccountMax: number;
  /** Registrations and logins per client address. */
  authAddressMax: number;
  authWindowMs: number;
  /** Counters shared by every instance; `null` keeps them in this process's memory. */
  redisUrl: string | null;
  redisKeyPrefix: string;
}

/** Milliseconds a client may take: sending its headers, its whole request, between requests on a kept-alive connection, and with nothing moving while a request is open. */
export interface TimeoutConfig {
  headersMs: number;
  requestMs: number;
  keepAliveMs: number;
  connectionMs: number;
}

/** Past either threshold requests are refused with 503; 0 turns a check off. */
export interface OverloadConfig {
  maxEventLoopDelayMs: number;
  maxRssBytes: number;
}

/** One or more bad settings; the message has one line per setting, so a single start reports them all. */
export class ConfigError extends Error {
  readonly problems: string[];

  constructor(problems: string | string[]) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(list.length === 1 ? (list[0] ?? '') : [`${list.length} problems:`, ...list.map((problem) => `  ${problem}`)].join('\n'));
    this.problems = list;
  }
}

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

/** A whole number where 0 means "off". */
function parseCount(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new ConfigError(`${name} must be a whole number, 0 for no limit, got "${raw}"`);
  }
  return value;
}

/**
 * A hop count, or the addresses and CIDR ranges of the proxies in front: X-Forwarded-For is only as trustworthy
 * as whoever set it, so `true` (believe anyone) is not offered.
 */
function parseTrustProxy(raw: string | undefined): Config['trustProxy'] {
  const text = raw?.trim() ?? '';
  if (text === '' || text === '0') return false;
  if (/^\d+$/.test(text)) return Number(text);
  const entries = text.split(',').map((entry) => entry.trim()).filter(Boolean);
  const bad = entries.filter((entry) => isIP(entry.replace(/\/\d{1,3}$/, '')) === 0);
  if (bad.length > 0) {
    throw new ConfigError(bad.map((entry) => `TRUST_PROXY must be a number of proxies or their addresses (10.0.0.1, 10.0.0.0/8), got "${entry}"`));
  }
  return entries;
}

function parseRedisUrl(raw: string | undefined): string | null {
  if (raw === undefined || raw === '') return null;
  // The value is not echoed: it may carry a password.
  if (!/^rediss?:\/\//.test(raw) || !URL.canParse(raw)) throw new ConfigError('REDIS_URL must be a redis:// or rediss:// URL');
  return raw;
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

/** A duration setting in milliseconds, from seconds or a number with a unit; the fallback is in seconds. */
function durationMs(env: Env, name: string, fallbackSeconds: number): number {
  const raw = env[name];
  return 1000 * (raw ? parseDuration(raw, name) : fallbackSeconds);
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
    return {
      kind: 'postgres',
      url: raw,
      poolSize: parsePositiveInt(env.DATABASE_POOL_SIZE, 'DATABASE_POOL_SIZE', 10),
      connectTimeoutMs: durationMs(env, 'DATABASE_CONNECT_TIMEOUT', 5),
    };
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
  const bad = origins.filter((origin) => !/^https?:\/\/[^/\s]+$/.test(origin));
  if (bad.length > 0) {
    throw new ConfigError(bad.map((origin) => `CORS_ORIGINS entries must look like https://example.com (no path), got "${origin}"`));
  }
  return origins;
}

function parseNodeEnv(raw: string | undefined): Config['env'] {
  const nodeEnv = raw ?? 'development';
  if (nodeEnv !== 'development' && nodeEnv !== 'production' && nodeEnv !== 'test') {
    throw new ConfigError(`NODE_ENV must be development, production or test, got "${nodeEnv}"`);
  }
  return nodeEnv;
}

function parseLogLevel(raw: string | undefined): string {
  const logLevel = raw ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }
  return logLevel;
}

/** The secret as set, or `null` when it is to be generated: in production it never is. */
function parseSecret(raw: string | undefined, nodeEnv: Config['env']): string | null {
  if (raw === undefined || raw === '') {
    if (nodeEnv === 'production') {
      throw new ConfigError('JWT_SECRET is required when NODE_ENV=production (use at least 32 random characters)');
    }
    return null;
  }
  if (raw.length < MIN_SECRET_LENGTH) throw new ConfigError(`JWT_SECRET must be at least ${MIN_SECRET_LENGTH} characters long`);
  return raw;
}

/**
 * The real environment over `.env` in the working directory, when there is one: a variable set in both keeps
 * its real value, so a deployment can override a checked-in or copied file without editing it.
 */
export function readEnvironment(file = path.resolve('.env'), env: Env = process.env): Env {
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return env;
    throw new ConfigError(`${file} cannot be read: ${(error as Error).message}`);
  }
  return { ...parseEnv(content), ...env };
}

export function loadConfig(env: Env = readEnvironment()): Config {
  const problems: string[] = [];
  // Each setting is read on its own: a bad one is noted and the others are still checked.
  const read = <T>(parse: () => T, placeholder: T): T => {
    try {
      return parse();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems);
      return placeholder;
    }
  };

  const milliseconds = (name: string, fallbackSeconds: number) => read(() => durationMs(env, name, fallbackSeconds), 0);

  const nodeEnv = read(() => parseNodeEnv(env.NODE_ENV), 'development');
  const dataDir = path.resolve(env.DATA_DIR || 'data');
  const config: Omit<Config, 'jwtSecret'> = {
    env: nodeEnv,
    host: env.HOST || '127.0.0.1',
    port: read(() => parsePort(env.PORT, 'PORT', 3000), 0),
    logLevel: read(() => parseLogLevel(env.LOG_LEVEL), ''),
    dataDir,
    database: read(() => parseDatabase(env.DATABASE_URL, dataDir, env), { kind: 'sqlite', file: '' }),
    jwtTtlSeconds: read(() => (env.JWT_EXPIRES_IN ? parseDuration(env.JWT_EXPIRES_IN, 'JWT_EXPIRES_IN') : 30 * 86400), 0),
    corsOrigins: read(() => parseCors(env.CORS_ORIGINS), true),
    workers: read(() => parsePositiveInt(env.WORKERS, 'WORKERS', 1), 1),
    trustProxy: read(() => parseTrustProxy(env.TRUST_PROXY), false),
    rateLimits: {
      max: read(() => parseCount(env.RATE_LIMIT_MAX, 'RATE_LIMIT_MAX', 600), 0),
      windowMs: milliseconds('RATE_LIMIT_WINDOW', 60),
      authAccountMax: read(() => parseCount(env.AUTH_RATE_LIMIT_MAX, 'AUTH_RATE_LIMIT_MAX', 10), 0),
      authAddressMax: read(() => parseCount(env.AUTH_ADDRESS_RATE_LIMIT_MAX, 'AUTH_ADDRESS_RATE_LIMIT_MAX', 100), 0),
      authWindowMs: milliseconds('AUTH_RATE_LIMIT_WINDOW', 15 * 60),
      redisUrl: read(() => parseRedisUrl(env.REDIS_URL), null),
      redisKeyPrefix: env.REDIS_KEY_PREFIX || 'conduit:',
    },
    timeouts: {
      headersMs: milliseconds('HEADERS_TIMEOUT', 10),
      requestMs: milliseconds('REQUEST_TIMEOUT', 30),
      keepAliveMs: milliseconds('KEEP_ALIVE_TIMEOUT', 72),
      connectionMs: milliseconds('CONNECTION_TIMEOUT', 60),
    },
    overload: {
      maxEventLoopDelayMs: read(() => parseCount(env.OVERLOAD_EVENT_LOOP_DELAY_MS, 'OVERLOAD_EVENT_LOOP_DELAY_MS', 1000), 0),
      maxRssBytes: read(() => parseCount(env.OVERLOAD_RSS_MB, 'OVERLOAD_RSS_MB', 0), 0) * 1024 * 1024,
    },
  };
  // Node refuses a server whose headers may take longer than the whole request.
  if (config.timeouts.headersMs > config.timeouts.requestMs) problems.push('HEADERS_TIMEOUT must not be longer than REQUEST_TIMEOUT');
  const secret = read(() => parseSecret(env.JWT_SECRET, nodeEnv), null);
  if (problems.length > 0) throw new ConfigError(problems);
  // Generated only once everything else is valid: a rejected configuration leaves no file behind.
  return { ...config, jwtSecret: secret ?? localSecret(dataDir) };
}
