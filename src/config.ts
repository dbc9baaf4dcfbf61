import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { Ajv, type ErrorObject } from 'ajv';
import { envSchema } from 'env-schema';
import { unwritable } from './setting-error.js';
import {
  MIN_SECRET_LENGTH,
  SETTING_FORMATS,
  SETTING_NAMES,
  SETTINGS,
  type SettingName,
  type Settings,
  settingSchemas,
} from './settings.js';

export type DatabaseConfig =
  | {
      kind: 'sqlite';
      file: string;
      /** `full` makes a commit durable before it is acknowledged; see SQLITE_SYNCHRONOUS for what `normal` risks. */
      synchronous: Settings['SQLITE_SYNCHRONOUS'];
    }
  | {
      kind: 'postgres';
      url: string;
      poolSize: number;
      /** Waiting longer for a connection than this fails the request (503) instead of hanging while the database is down. */
      connectTimeoutMs: number;
      /**
       * PostgreSQL cancels a statement of these connections that runs longer (503), so that one gone wrong cannot hold
       * a connection for good; 0 for none, as for the commands whose statements may rightly run for minutes, and
       * behind a pooler, which refuses it when the connection opens (PgBouncer's `connect_query` sets it instead).
       */
      statementTimeoutMs: number;
      /**
       * Straight to PostgreSQL, for what needs a session of its own: LISTEN, the migrations, the `conduit` commands.
       * `url` itself, unless `url` goes through a pooler in transaction mode (db/direct.ts).
       */
      directUrl: string;
      /** Sends the texts that have a name as named statements (drivers/postgres.ts); off for a pooler that cannot keep them. */
      preparedStatements: boolean;
      /** Streaming replicas that take reads (db/replicas.ts); none when absent, as for the `conduit` commands. */
      replicas?: ReplicaConfig;
    };

export interface ReplicaConfig {
  urls: string[];
  /** A replica further behind than this takes no reads until it catches up. */
  maxLagMs: number;
}

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
  /** Lifetime in seconds of the value that marks a device its account signed in from (modules/users/devices.ts). */
  knownDeviceTtlSeconds: number;
  /** `true` allows any origin; otherwise the exact origins allowed. */
  corsOrigins: true | string[];
  /** Server processes sharing the port (`conduit serve`). */
  workers: number;
  /** Fastify's `trustProxy`: `false` for direct clients, else the proxy hops or addresses whose X-Forwarded-For is believed. */
  trustProxy: false | number | string[];
  /** The bearer token GET /metrics asks for; `null` answers it to clients on this host alone. */
  metricsToken: string | null;
  rateLimits: RateLimitConfig;
  timeouts: TimeoutConfig;
  overload: OverloadConfig;
  retention: RetentionConfig;
  webhooks: WebhookConfig;
  lifecycle: LifecycleConfig;
  events: EventStreamConfig;
  /** Searches one client may have running or waiting (articles/search-turns.ts); 0 for no limit. */
  searchesPerClient: number;
  feeds: FeedConfig;
  caching: CachingConfig;
}

/** What the feeds need to link outside themselves. */
export interface FeedConfig {
  siteName: string;
  /** Without a trailing slash; the paths are appended to it. */
  frontendUrl: string;
  /** Paths after `frontendUrl`, each with its `{slug}`, `{username}` or `{tag}` placeholder. */
  articlePath: string;
  profilePath: string;
  tagPath: string;
  /** This server's public address without a trailing slash; `null` to take it from each request. */
  publicUrl: string | null;
}

/** What Cache-Control lets shared caches do with anonymous answers, in seconds. */
export interface CachingConfig {
  sharedMaxAgeSeconds: number;
  staleWhileRevalidateSeconds: number;
}

/** How long the outbox and read notifications are kept, in milliseconds. */
export interface RetentionConfig {
  eventsMs: number;
  readNotificationsMs: number;
}

/** Counts are per window; a count of 0 turns that limit off. */
export interface RateLimitConfig {
  /** Requests per client address, on every route but the probes and /metrics. */
  max: number;
  windowMs: number;
  /** Units of writing (rate-limit.ts `writeUnits`) per signed-in account, in the same window. */
  writeMax: number;
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

export interface LifecycleConfig {
  /** This process records scheduled articles' publications (articles/scheduler.ts). */
  publishScheduled: boolean;
  /** How long a leaving account waits before it is purged (users/leaving.ts); 0 purges at once. */
  deletionGraceMs: number;
}

export interface WebhookConfig {
  /** This process runs the delivery worker; deliveries queue in the database either way. */
  deliver: boolean;
  /** One attempt, from resolving the host to the end of the answer. */
  timeoutMs: number;
  /** A delivery failing for longer than this since it was queued is given up, and its endpoint disabled. */
  retryForMs: number;
  allowLoopback: boolean;
  /** The wait after the first failed attempt, doubled after each further one. No setting: tests shorten it to run retries in milliseconds. */
  backoffBaseMs: number;
}

/** The live event stream: how many may be open (0 for no limit) and how often an idle one gets a heartbeat. */
export interface EventStreamConfig {
  perClient: number;
  max: number;
  heartbeatMs: number;
  /** Bytes waiting to be sent that all the streams of the process may hold together. */
  bufferBudgetBytes: number;
  /** What one resuming request may read from the outbox and send before it tells the client to resume further on. */
  replayMaxEvents: number;
  replayMaxBytes: number;
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

const MIB = 1024 * 1024;

/** Soon enough to ride out a blip at the receiver; doubling from here, the waits reach their one-hour cap by the 11th attempt. */
const WEBHOOK_BACKOFF_BASE_MS = 5_000;

const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

type Env = Record<string, string | undefined>;

/** Accepts a number of seconds or a number with a unit: 90s, 15m, 12h, 30d; 0 only where `minimum` is 0. */
export function parseDuration(raw: string, name: string, minimum = 1): number {
  const match = /^(\d+)\s*([smhd]?)$/.exec(raw.trim());
  const amount = match ? Number(match[1]) : NaN;
  const seconds = amount * (DURATION_UNITS[match?.[2] || 's'] ?? NaN);
  if (!Number.isSafeInteger(seconds) || seconds < minimum) {
    throw new ConfigError(`${name} must be a duration such as 3600, 90m, 12h or 30d, got "${raw}"`);
  }
  return seconds;
}

/** Like env-schema's own validator (every error, defaults filled in, numbers from strings), plus what the schema adds. */
const validator = new Ajv({
  allErrors: true,
  useDefaults: true,
  coerceTypes: true,
  // Gives each error its schema, where the refused setting's errorMessage is.
  verbose: true,
  keywords: [{ keyword: 'errorMessage', schemaType: 'string' }],
  formats: SETTING_FORMATS,
});

/**
 * The values the schema is to check: an empty variable counts as unset (`PORT=` in a compose file keeps the
 * default), and a list is split into its entries.
 */
function settingValues(env: Env): Partial<Record<SettingName, string | string[]>> {
  const values: Partial<Record<SettingName, string | string[]>> = {};
  for (const name of SETTING_NAMES) {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') continue;
    values[name] =
      settingSchemas[name].type === 'array'
        ? raw
            .split(',')
            .map((entry) => entry.trim())
            .filter(Boolean)
        : raw;
  }
  return values;
}

/** One line per refused value, naming the variable; a list's bad entries get a line each. */
function problemLines(errors: ErrorObject[]): string[] {
  const lines = new Map<string, { name: SettingName; line: string }>();
  for (const error of errors) {
    const where = error.keyword === 'required' ? `/${String(error.params.missingProperty)}` : error.instancePath;
    const name = where.split('/')[1] as SettingName | undefined;
    // The failed `if` itself names no variable: the `then` it led to does.
    if (name === undefined || lines.has(where)) continue;
    const reason =
      (error.parentSchema as { errorMessage?: string } | undefined)?.errorMessage ??
      (error.keyword === 'enum' ? `must be one of ${(error.params.allowedValues as string[]).join(', ')}` : error.message);
    const echoed = error.keyword !== 'required' && settingSchemas[name].writeOnly !== true;
    lines.set(where, { name, line: `${name} ${reason}${echoed ? `, got "${String(error.data)}"` : ''}` });
  }
  const order = (name: SettingName) => SETTING_NAMES.indexOf(name);
  return [...lines.values()].sort((a, b) => order(a.name) - order(b.name)).map(({ line }) => line);
}

/** Problems between settings that are each fine on their own; `refused` are those already reported. */
function conflicts(values: Partial<Record<SettingName, unknown>>, refused: string[]): string[] {
  const seconds = (name: SettingName) => parseDuration(String(values[name] ?? settingSchemas[name].default), name);
  const shorter = (first: SettingName, second: SettingName, why: string) => {
    if (refused.some((line) => line.startsWith(`${first} `) || line.startsWith(`${second} `))) return [];
    return seconds(first) > seconds(second) ? [`${first} must not be longer than ${second}${why}`] : [];
  };
  return [
    // Node refuses a server whose headers may take longer than the whole request.
    ...shorter('HEADERS_TIMEOUT', 'REQUEST_TIMEOUT', ''),
    // An idle stream's heartbeat is what keeps the connection timeout from closing it.
    ...shorter('EVENT_STREAM_HEARTBEAT', 'CONNECTION_TIMEOUT', ', or idle event streams are closed'),
  ];
}

/** Every setting, typed and with its default, or a ConfigError listing every refused value at once. */
function readSettings(env: Env): Settings {
  const values = settingValues(env);
  let problems: string[];
  try {
    // Only the environment given: readEnvironment has already laid .env under the real one, and tests pass their own.
    const settings = envSchema<Settings>({ schema: SETTINGS, data: values, env: false, ajv: validator });
    problems = conflicts(settings, []);
    if (problems.length === 0) return settings;
  } catch (error) {
    const errors = (error as { errors?: ErrorObject[] }).errors;
    if (errors === undefined) throw error;
    problems = problemLines(errors);
    problems.push(...conflicts(values, problems));
  }
  throw new ConfigError(problems);
}

/**
 * A hop count, or the addresses and CIDR ranges of the proxies in front: X-Forwarded-For is only as trustworthy
 * as whoever set it, so `true` (believe anyone) is not offered.
 */
function trustProxy(raw: string | undefined): Config['trustProxy'] {
  const text = raw?.trim() ?? '0';
  if (/^\d+$/.test(text)) return Number(text) === 0 ? false : Number(text);
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
}

const withoutTrailingSlash = (url: string) => url.replace(/\/+$/, '');

function database(settings: Settings, dataDir: string): DatabaseConfig {
  const url = settings.DATABASE_URL;
  const synchronous = settings.SQLITE_SYNCHRONOUS;
  if (url === undefined) return { kind: 'sqlite', file: path.join(dataDir, 'conduit.db'), synchronous };
  if (url.startsWith('sqlite:')) {
    return { kind: 'sqlite', file: path.resolve(url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')), synchronous };
  }
  const directUrl = settings.DATABASE_DIRECT_URL ?? url;
  // A pooler refuses the timeout as a startup parameter, and could not keep it to one client's statements anyway.
  const pooled = directUrl !== url;
  return {
    kind: 'postgres',
    url,
    poolSize: settings.DATABASE_POOL_SIZE,
    connectTimeoutMs: 1000 * parseDuration(settings.DATABASE_CONNECT_TIMEOUT, 'DATABASE_CONNECT_TIMEOUT'),
    statementTimeoutMs: pooled ? 0 : 1000 * parseDuration(settings.DATABASE_STATEMENT_TIMEOUT, 'DATABASE_STATEMENT_TIMEOUT', 0),
    directUrl,
    preparedStatements: settings.DATABASE_PREPARED_STATEMENTS === 'on',
    replicas: {
      urls: settings.DATABASE_REPLICA_URLS,
      maxLagMs: 1000 * parseDuration(settings.DATABASE_REPLICA_MAX_LAG, 'DATABASE_REPLICA_MAX_LAG'),
    },
  };
}

/**
 * Outside production a missing secret is generated once and kept in the data folder, so a developer
 * needs no set-up and tokens still survive restarts. `wx` makes concurrent first starts agree on one file.
 */
function localSecret(dataDir: string): string {
  const file = path.join(dataDir, 'jwt-secret');
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(file, randomBytes(48).toString('base64url'), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    // The secret an earlier start wrote is the one to keep using; any other EEXIST is a file where a folder should be.
    const { code, path: where } = error as NodeJS.ErrnoException;
    if (code !== 'EEXIST' || where !== file) {
      throw unwritable(
        error,
        'DATA_DIR',
        `the generated JWT secret to ${dataDir}`,
        'point DATA_DIR at a writable folder, or set JWT_SECRET',
      );
    }
  }
  const secret = readFileSync(file, 'utf8').trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new ConfigError(`${file} holds a secret shorter than ${MIN_SECRET_LENGTH} characters; delete it to regenerate`);
  }
  return secret;
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
  const settings = readSettings(env);
  const milliseconds = (name: SettingName) => 1000 * parseDuration(String(settings[name]), name);
  const dataDir = path.resolve(settings.DATA_DIR);
  const config: Omit<Config, 'jwtSecret'> = {
    env: settings.NODE_ENV,
    host: settings.HOST,
    port: settings.PORT,
    logLevel: settings.LOG_LEVEL,
    dataDir,
    database: database(settings, dataDir),
    jwtTtlSeconds: parseDuration(settings.JWT_EXPIRES_IN, 'JWT_EXPIRES_IN'),
    knownDeviceTtlSeconds: parseDuration(settings.KNOWN_DEVICE_EXPIRES_IN, 'KNOWN_DEVICE_EXPIRES_IN'),
    corsOrigins: settings.CORS_ORIGINS.includes('*') ? true : settings.CORS_ORIGINS,
    workers: settings.WORKERS,
    trustProxy: trustProxy(settings.TRUST_PROXY),
    metricsToken: settings.METRICS_TOKEN ?? null,
    rateLimits: {
      max: settings.RATE_LIMIT_MAX,
      windowMs: milliseconds('RATE_LIMIT_WINDOW'),
      writeMax: settings.WRITE_RATE_LIMIT_MAX,
      authAccountMax: settings.AUTH_RATE_LIMIT_MAX,
      authAddressMax: settings.AUTH_ADDRESS_RATE_LIMIT_MAX,
      authWindowMs: milliseconds('AUTH_RATE_LIMIT_WINDOW'),
      redisUrl: settings.REDIS_URL ?? null,
      redisKeyPrefix: settings.REDIS_KEY_PREFIX,
    },
    timeouts: {
      headersMs: milliseconds('HEADERS_TIMEOUT'),
      requestMs: milliseconds('REQUEST_TIMEOUT'),
      keepAliveMs: milliseconds('KEEP_ALIVE_TIMEOUT'),
      connectionMs: milliseconds('CONNECTION_TIMEOUT'),
    },
    overload: {
      maxEventLoopDelayMs: settings.OVERLOAD_EVENT_LOOP_DELAY_MS,
      maxRssBytes: settings.OVERLOAD_RSS_MB * MIB,
    },
    retention: {
      eventsMs: milliseconds('EVENT_RETENTION'),
      readNotificationsMs: milliseconds('NOTIFICATION_RETENTION'),
    },
    webhooks: {
      deliver: settings.WEBHOOKS_DELIVERY === 'on',
      timeoutMs: milliseconds('WEBHOOK_TIMEOUT'),
      retryForMs: milliseconds('WEBHOOK_RETRY_FOR'),
      allowLoopback: settings.WEBHOOK_ALLOW_LOOPBACK,
      backoffBaseMs: WEBHOOK_BACKOFF_BASE_MS,
    },
    lifecycle: {
      publishScheduled: settings.SCHEDULED_PUBLISHING === 'on',
      deletionGraceMs: 1000 * parseDuration(settings.ACCOUNT_DELETION_GRACE, 'ACCOUNT_DELETION_GRACE', 0),
    },
    events: {
      perClient: settings.EVENT_STREAMS_PER_CLIENT,
      max: settings.EVENT_STREAMS_MAX,
      heartbeatMs: milliseconds('EVENT_STREAM_HEARTBEAT'),
      bufferBudgetBytes: settings.EVENT_STREAMS_BUFFER_MB * MIB,
      replayMaxEvents: settings.EVENT_REPLAY_MAX_EVENTS,
      replayMaxBytes: settings.EVENT_REPLAY_MAX_MB * MIB,
    },
    searchesPerClient: settings.SEARCHES_PER_CLIENT,
    feeds: {
      siteName: settings.SITE_NAME,
      frontendUrl: withoutTrailingSlash(settings.FRONTEND_URL),
      articlePath: settings.FRONTEND_ARTICLE_PATH,
      profilePath: settings.FRONTEND_PROFILE_PATH,
      tagPath: settings.FRONTEND_TAG_PATH,
      publicUrl: settings.PUBLIC_URL === undefined ? null : withoutTrailingSlash(settings.PUBLIC_URL),
    },
    caching: {
      sharedMaxAgeSeconds: settings.SHARED_CACHE_MAX_AGE,
      staleWhileRevalidateSeconds: settings.SHARED_CACHE_STALE_WHILE_REVALIDATE,
    },
  };
  // Generated only once everything else is valid: a rejected configuration leaves no file behind.
  return { ...config, jwtSecret: settings.JWT_SECRET ?? localSecret(dataDir) };
}
