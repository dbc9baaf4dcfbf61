import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Config, ConfigError, loadConfig, parseDuration, readEnvironment } from '../src/config.js';
import { SettingError } from '../src/setting-error.js';
import { SETTING_NAMES, settingSchemas } from '../src/settings.js';

const SECRET = 's'.repeat(32);

/** Loads a config and expects it to fail with a ConfigError. */
function rejected(env: Record<string, string | undefined>): ConfigError {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  return caught as ConfigError;
}

/** Loads a config and expects it to fail with a ConfigError whose message is one readable line. */
function configError(env: Record<string, string | undefined>): ConfigError {
  const error = rejected(env);
  expect(error.message.trim().length).toBeGreaterThan(10);
  expect(error.message).not.toContain('\n');
  return error;
}

describe('loadConfig', () => {
  let dataDir = '';

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'conduit-config-'));
  });

  afterEach(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** A minimal environment; never the process's own. */
  const env = (extra: Record<string, string | undefined> = {}) => ({ DATA_DIR: dataDir, JWT_SECRET: SECRET, ...extra });

  // ---------------------------------------------------------------- defaults

  it('uses the documented defaults', () => {
    const config = loadConfig(env());
    expect(config).toEqual<Config>({
      env: 'development',
      host: '127.0.0.1',
      port: 3000,
      logLevel: 'info',
      dataDir,
      database: { kind: 'sqlite', file: path.join(dataDir, 'conduit.db'), synchronous: 'full' },
      jwtSecret: SECRET,
      jwtTtlSeconds: 30 * 86400,
      knownDeviceTtlSeconds: 90 * 86400,
      corsOrigins: true,
      workers: 1,
      trustProxy: false,
      metricsToken: null,
      rateLimits: {
        max: 600,
        windowMs: 60_000,
        writeMax: 120,
        authAccountMax: 10,
        authAddressMax: 100,
        authWindowMs: 15 * 60_000,
        redisUrl: null,
        redisKeyPrefix: 'conduit:',
      },
      timeouts: { headersMs: 10_000, requestMs: 30_000, keepAliveMs: 72_000, connectionMs: 60_000 },
      overload: { maxEventLoopDelayMs: 1000, maxRssBytes: 0 },
      retention: { eventsMs: 30 * 86_400_000, readNotificationsMs: 90 * 86_400_000 },
      webhooks: { deliver: true, timeoutMs: 10_000, retryForMs: 24 * 3_600_000, allowLoopback: false, backoffBaseMs: 5_000 },
      lifecycle: { publishScheduled: true, deletionGraceMs: 30 * 86_400_000 },
      searchesPerClient: 2,
      events: {
        perClient: 5,
        max: 1000,
        heartbeatMs: 15_000,
        bufferBudgetBytes: 64 * 1024 * 1024,
        replayMaxEvents: 10_000,
        replayMaxBytes: 16 * 1024 * 1024,
      },
      feeds: {
        siteName: 'Conduit',
        frontendUrl: 'http://localhost:4200',
        articlePath: '/article/{slug}',
        profilePath: '/profile/{username}',
        tagPath: '/?tag={tag}',
        publicUrl: null,
      },
      caching: { sharedMaxAgeSeconds: 5, staleWhileRevalidateSeconds: 30 },
    });
  });

  it('reads the feed settings, without trailing slashes on the URLs, and refuses a template without its placeholder', () => {
    const config = loadConfig(
      env({
        FRONTEND_URL: 'https://blog.example.com/app/',
        FRONTEND_ARTICLE_PATH: '/#/article/{slug}',
        PUBLIC_URL: 'https://api.example.com/',
        SITE_NAME: 'My Blog',
      }),
    );
    expect(config.feeds).toMatchObject({
      siteName: 'My Blog',
      frontendUrl: 'https://blog.example.com/app',
      articlePath: '/#/article/{slug}',
      publicUrl: 'https://api.example.com',
    });
    const error = rejected(env({ FRONTEND_URL: 'ftp://files', FRONTEND_PROFILE_PATH: '/people/:username', PUBLIC_URL: 'nope' }));
    expect(error.problems).toEqual([
      'FRONTEND_URL must be an http:// or https:// URL, got "ftp://files"',
      'FRONTEND_PROFILE_PATH must start with / and hold {username}, got "/people/:username"',
      'PUBLIC_URL must be an http:// or https:// URL, got "nope"',
    ]);
  });

  it('reads the webhook settings', () => {
    const config = loadConfig(
      env({ WEBHOOKS_DELIVERY: 'off', WEBHOOK_TIMEOUT: '3s', WEBHOOK_RETRY_FOR: '2h', WEBHOOK_ALLOW_LOOPBACK: 'true' }),
    );
    expect(config.webhooks).toEqual({ deliver: false, timeoutMs: 3_000, retryForMs: 7_200_000, allowLoopback: true, backoffBaseMs: 5_000 });
    expect(configError(env({ WEBHOOK_ALLOW_LOOPBACK: 'yes' })).message).toBe('WEBHOOK_ALLOW_LOOPBACK must be true or false, got "yes"');
    expect(configError(env({ WEBHOOKS_DELIVERY: 'maybe' })).message).toBe('WEBHOOKS_DELIVERY must be one of on, off, got "maybe"');
  });

  it('reads the limits, timeouts and overload thresholds, 0 turning a limit off', () => {
    const config = loadConfig(
      env({
        RATE_LIMIT_MAX: '0',
        RATE_LIMIT_WINDOW: '10s',
        WRITE_RATE_LIMIT_MAX: '30',
        AUTH_RATE_LIMIT_MAX: '3',
        AUTH_ADDRESS_RATE_LIMIT_MAX: '20',
        AUTH_RATE_LIMIT_WINDOW: '1h',
        REDIS_URL: 'redis://:secret@cache:6379/2',
        REDIS_KEY_PREFIX: 'staging:',
        HEADERS_TIMEOUT: '5',
        REQUEST_TIMEOUT: '1m',
        KEEP_ALIVE_TIMEOUT: '2m',
        CONNECTION_TIMEOUT: '90s',
        OVERLOAD_EVENT_LOOP_DELAY_MS: '0',
        OVERLOAD_RSS_MB: '512',
      }),
    );
    expect(config.rateLimits).toEqual({
      max: 0,
      windowMs: 10_000,
      writeMax: 30,
      authAccountMax: 3,
      authAddressMax: 20,
      authWindowMs: 3_600_000,
      redisUrl: 'redis://:secret@cache:6379/2',
      redisKeyPrefix: 'staging:',
    });
    expect(config.timeouts).toEqual({ headersMs: 5000, requestMs: 60_000, keepAliveMs: 120_000, connectionMs: 90_000 });
    expect(config.overload).toEqual({ maxEventLoopDelayMs: 0, maxRssBytes: 512 * 1024 * 1024 });
  });

  it("reads TRUST_PROXY as a hop count or the proxies' addresses", () => {
    expect(loadConfig(env({ TRUST_PROXY: '0' })).trustProxy).toBe(false);
    expect(loadConfig(env({ TRUST_PROXY: '2' })).trustProxy).toBe(2);
    expect(loadConfig(env({ TRUST_PROXY: '10.0.0.1, 10.1.0.0/16,::1' })).trustProxy).toEqual(['10.0.0.1', '10.1.0.0/16', '::1']);
  });

  it('refuses bad limits, timeouts and proxy settings, without echoing a Redis password', () => {
    const error = rejected(
      env({
        RATE_LIMIT_MAX: '-1',
        AUTH_RATE_LIMIT_WINDOW: 'soon',
        REDIS_URL: 'http://:hunter2@cache',
        HEADERS_TIMEOUT: '1m',
        REQUEST_TIMEOUT: '30s',
        TRUST_PROXY: 'true',
      }),
    );
    expect(error.problems.map((problem) => problem.split(' ')[0])).toEqual([
      'TRUST_PROXY',
      'RATE_LIMIT_MAX',
      'AUTH_RATE_LIMIT_WINDOW',
      'REDIS_URL',
      'HEADERS_TIMEOUT',
    ]);
    expect(error.message).not.toContain('hunter2');
  });

  it('refuses an event stream heartbeat longer than the connection timeout, which would close idle streams', () => {
    expect(loadConfig(env({ EVENT_STREAM_HEARTBEAT: '30s', CONNECTION_TIMEOUT: '30s' })).events.heartbeatMs).toBe(30_000);
    expect(() => loadConfig(env({ EVENT_STREAM_HEARTBEAT: '2m' }))).toThrow(
      'EVENT_STREAM_HEARTBEAT must not be longer than CONNECTION_TIMEOUT, or idle event streams are closed',
    );
  });

  it('reads WORKERS as a positive whole number', () => {
    expect(loadConfig(env({ WORKERS: '4' })).workers).toBe(4);
    expect(() => loadConfig(env({ WORKERS: '0' }))).toThrow(/WORKERS must be a positive whole number/);
  });

  it('puts the data folder at ./data when DATA_DIR is unset', () => {
    const config = loadConfig({ JWT_SECRET: SECRET });
    expect(config.dataDir).toBe(path.resolve('data'));
    expect(config.database).toEqual({ kind: 'sqlite', file: path.resolve('data', 'conduit.db'), synchronous: 'full' });
  });

  it('reads nothing from process.env when given an environment', () => {
    const saved = process.env.PORT;
    process.env.PORT = '4321';
    try {
      expect(loadConfig(env()).port).toBe(3000);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });

  it('takes HOST, PORT and LOG_LEVEL from the environment', () => {
    const config = loadConfig(env({ HOST: '0.0.0.0', PORT: '8080', LOG_LEVEL: 'debug' }));
    expect(config).toMatchObject({ host: '0.0.0.0', port: 8080, logLevel: 'debug' });
    expect(loadConfig(env({ PORT: '0' })).port).toBe(0);
    expect(loadConfig(env({ PORT: '65535' })).port).toBe(65535);
    expect(loadConfig(env({ PORT: '' })).port).toBe(3000);
  });

  // ---------------------------------------------------------------- database

  it('reads DATABASE_URL=sqlite:<path> as a file, relative to the working directory', () => {
    const sqlite = (file: string) => ({ kind: 'sqlite', file, synchronous: 'full' });
    expect(loadConfig(env({ DATABASE_URL: 'sqlite:./var/app.db' })).database).toEqual(sqlite(path.resolve('var/app.db')));
    const absolute = path.join(dataDir, 'abs.db');
    expect(loadConfig(env({ DATABASE_URL: `sqlite:${absolute}` })).database).toEqual(sqlite(absolute));
    expect(loadConfig(env({ DATABASE_URL: `sqlite://${absolute}` })).database).toEqual(sqlite(absolute));
  });

  it('takes SQLITE_SYNCHRONOUS, and refuses anything but full or normal', () => {
    expect(loadConfig(env({ SQLITE_SYNCHRONOUS: 'normal' })).database).toMatchObject({ kind: 'sqlite', synchronous: 'normal' });
    expect(() => loadConfig(env({ SQLITE_SYNCHRONOUS: 'off' }))).toThrow(/SQLITE_SYNCHRONOUS/);
  });

  it('refuses DATABASE_URL=sqlite: without a path', () => {
    expect(configError(env({ DATABASE_URL: 'sqlite:' })).message).toContain('DATABASE_URL');
  });

  it('reads the replicas and the lag they may have', () => {
    const url = 'postgres://app@primary/conduit';
    const replicas = 'postgres://app@replica-1/conduit,postgresql://app@replica-2/conduit';
    expect(loadConfig(env({ DATABASE_URL: url, DATABASE_REPLICA_URLS: replicas, DATABASE_REPLICA_MAX_LAG: '30' })).database).toMatchObject({
      replicas: { urls: ['postgres://app@replica-1/conduit', 'postgresql://app@replica-2/conduit'], maxLagMs: 30_000 },
    });
    expect(() => loadConfig(env({ DATABASE_URL: url, DATABASE_REPLICA_URLS: 'sqlite:./replica.db' }))).toThrow(/DATABASE_REPLICA_URLS/);
  });

  it('reads postgres:// and postgresql:// URLs with a pool size and a connect timeout', () => {
    const url = 'postgres://app:secret@db.internal:5432/conduit';
    expect(loadConfig(env({ DATABASE_URL: url })).database).toEqual({
      kind: 'postgres',
      url,
      poolSize: 10,
      connectTimeoutMs: 5000,
      statementTimeoutMs: 5000,
      directUrl: url,
      preparedStatements: true,
      replicas: { urls: [], maxLagMs: 5000 },
    });
    const alias = 'postgresql://app@localhost/conduit';
    expect(loadConfig(env({ DATABASE_URL: alias, DATABASE_POOL_SIZE: '4', DATABASE_CONNECT_TIMEOUT: '2' })).database).toEqual({
      kind: 'postgres',
      url: alias,
      poolSize: 4,
      connectTimeoutMs: 2000,
      statementTimeoutMs: 5000,
      directUrl: alias,
      preparedStatements: true,
      replicas: { urls: [], maxLagMs: 5000 },
    });
    expect(loadConfig(env({ DATABASE_URL: alias, DATABASE_CONNECT_TIMEOUT: '1m' })).database).toMatchObject({ connectTimeoutMs: 60_000 });
  });

  it('refuses an unknown database scheme, a broken postgres URL, a bad pool size and a bad connect timeout', () => {
    expect(configError(env({ DATABASE_URL: 'mysql://localhost/conduit' })).message).toContain('DATABASE_URL');
    expect(configError(env({ DATABASE_URL: 'postgres://[broken' })).message).toContain('DATABASE_URL');
    for (const size of ['0', '-1', 'ten', '2.5']) {
      expect(configError(env({ DATABASE_URL: 'postgres://localhost/conduit', DATABASE_POOL_SIZE: size })).message).toContain(
        'DATABASE_POOL_SIZE',
      );
    }
    for (const timeout of ['0', '-1', 'soon', '500ms']) {
      expect(configError(env({ DATABASE_URL: 'postgres://localhost/conduit', DATABASE_CONNECT_TIMEOUT: timeout })).message).toContain(
        'DATABASE_CONNECT_TIMEOUT',
      );
    }
  });

  it('reads DATABASE_STATEMENT_TIMEOUT as a duration, 0 for none, and refuses anything else', () => {
    const postgres = (timeout: string) => env({ DATABASE_URL: 'postgres://localhost/conduit', DATABASE_STATEMENT_TIMEOUT: timeout });
    expect(loadConfig(postgres('30')).database).toMatchObject({ statementTimeoutMs: 30_000 });
    expect(loadConfig(postgres('2m')).database).toMatchObject({ statementTimeoutMs: 120_000 });
    expect(loadConfig(postgres('0')).database).toMatchObject({ statementTimeoutMs: 0 });
    for (const timeout of ['-1', 'soon', '500ms']) {
      expect(configError(postgres(timeout)).message).toContain('DATABASE_STATEMENT_TIMEOUT');
    }
  });

  it('reads DATABASE_PREPARED_STATEMENTS as on or off, on by default', () => {
    const postgres = (extra: Record<string, string> = {}) => env({ DATABASE_URL: 'postgres://localhost/conduit', ...extra });
    expect(loadConfig(postgres()).database).toMatchObject({ preparedStatements: true });
    expect(loadConfig(postgres({ DATABASE_PREPARED_STATEMENTS: 'off' })).database).toMatchObject({ preparedStatements: false });
    expect(configError(postgres({ DATABASE_PREPARED_STATEMENTS: 'no' })).message).toBe(
      'DATABASE_PREPARED_STATEMENTS must be one of on, off, got "no"',
    );
  });

  it('reads DATABASE_DIRECT_URL, DATABASE_URL without it; set apart, no statement timeout goes through the pooler', () => {
    const pooled = 'postgres://app:secret@pgbouncer.internal:6432/conduit';
    const direct = 'postgres://app:secret@db.internal:5432/conduit';
    expect(loadConfig(env({ DATABASE_URL: direct })).database).toMatchObject({ directUrl: direct, statementTimeoutMs: 5000 });
    expect(loadConfig(env({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: direct })).database).toMatchObject({
      url: pooled,
      directUrl: direct,
      statementTimeoutMs: 0,
    });
    // The same URL twice is no pooler.
    expect(loadConfig(env({ DATABASE_URL: direct, DATABASE_DIRECT_URL: direct })).database).toMatchObject({ statementTimeoutMs: 5000 });
    const refused = configError(env({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: 'sqlite:./data/conduit.db' })).message;
    expect(refused).toBe('DATABASE_DIRECT_URL must be a postgres:// URL');
    expect(configError(env({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: 'postgres://app:hunter2@[broken/x' })).message).not.toContain(
      'hunter2',
    );
  });

  it('does not leak the database password in a configuration error', () => {
    const error = configError(env({ DATABASE_URL: 'postgres://app:hunter2-secret@[broken/conduit' }));
    expect(error.message).not.toContain('hunter2-secret');
  });

  // ---------------------------------------------------------------- secret

  it('refuses to start in production without JWT_SECRET, with a one-line reason', () => {
    for (const secret of [undefined, '']) {
      const error = configError({ NODE_ENV: 'production', DATA_DIR: dataDir, JWT_SECRET: secret });
      expect(error.message).toContain('JWT_SECRET');
      expect(error.message).toContain('production');
    }
    // And it did not quietly generate one.
    expect(existsSync(path.join(dataDir, 'jwt-secret'))).toBe(false);
  });

  it('starts in production with a long enough JWT_SECRET', () => {
    const config = loadConfig({ NODE_ENV: 'production', DATA_DIR: dataDir, JWT_SECRET: SECRET });
    expect(config.env).toBe('production');
    expect(config.jwtSecret).toBe(SECRET);
  });

  it('refuses a METRICS_TOKEN shorter than 32 characters or with spaces, and reads a good one', () => {
    for (const token of ['m'.repeat(31), `${'m'.repeat(20)} ${'m'.repeat(20)}`, 'm'.repeat(1025)]) {
      expect(configError({ DATA_DIR: dataDir, JWT_SECRET: SECRET, METRICS_TOKEN: token }).message).toContain('METRICS_TOKEN');
    }
    expect(loadConfig({ DATA_DIR: dataDir, JWT_SECRET: SECRET, METRICS_TOKEN: 'm'.repeat(32) }).metricsToken).toBe('m'.repeat(32));
  });

  it('refuses a JWT_SECRET shorter than 32 characters, in every environment', () => {
    for (const nodeEnv of ['production', 'development', 'test']) {
      const error = configError({ NODE_ENV: nodeEnv, DATA_DIR: dataDir, JWT_SECRET: 's'.repeat(31) });
      expect(error.message).toContain('JWT_SECRET');
    }
  });

  it('generates a secret outside production, keeps it in DATA_DIR/jwt-secret and reuses it', () => {
    const nested = path.join(dataDir, 'not', 'yet', 'there');
    const first = loadConfig({ NODE_ENV: 'development', DATA_DIR: nested });
    const file = path.join(nested, 'jwt-secret');
    expect(existsSync(file)).toBe(true);
    expect(first.jwtSecret.length).toBeGreaterThanOrEqual(32);
    expect(readFileSync(file, 'utf8').trim()).toBe(first.jwtSecret);
    if (process.platform !== 'win32') expect(statSync(file).mode & 0o077).toBe(0);

    const second = loadConfig({ NODE_ENV: 'test', DATA_DIR: nested });
    expect(second.jwtSecret).toBe(first.jwtSecret);

    // Another data folder gets another secret.
    const other = loadConfig({ DATA_DIR: path.join(dataDir, 'other') });
    expect(other.jwtSecret).not.toBe(first.jwtSecret);
  });

  it('prefers JWT_SECRET over a stored secret', () => {
    loadConfig({ DATA_DIR: dataDir });
    expect(loadConfig(env()).jwtSecret).toBe(SECRET);
  });

  it('refuses a stored secret that is too short', () => {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(path.join(dataDir, 'jwt-secret'), 'short');
    expect(configError({ DATA_DIR: dataDir }).message).toContain('jwt-secret');
  });

  // ---------------------------------------------------------------- bad values

  it('refuses a bad PORT', () => {
    for (const port of ['abc', '70000', '65536', '-1', '3.5', '80a']) {
      expect(configError(env({ PORT: port })).message, port).toContain('PORT');
    }
  });

  it('refuses an unknown LOG_LEVEL and accepts the known ones', () => {
    for (const level of ['verbose', 'INFO', 'warning']) {
      expect(configError(env({ LOG_LEVEL: level })).message, level).toContain('LOG_LEVEL');
    }
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) {
      expect(loadConfig(env({ LOG_LEVEL: level })).logLevel).toBe(level);
    }
  });

  it('refuses an unknown NODE_ENV', () => {
    expect(configError(env({ NODE_ENV: 'staging' })).message).toContain('NODE_ENV');
  });

  // ---------------------------------------------------------------- token lifetime

  it('reads JWT_EXPIRES_IN as seconds or with a unit', () => {
    const cases: Array<[string, number]> = [
      ['30d', 30 * 86400],
      ['3600', 3600],
      ['90s', 90],
      ['15m', 900],
      ['12h', 43200],
      ['1d', 86400],
      [' 7d ', 7 * 86400],
    ];
    for (const [raw, seconds] of cases) {
      expect(loadConfig(env({ JWT_EXPIRES_IN: raw })).jwtTtlSeconds, raw).toBe(seconds);
    }
    expect(loadConfig(env({ JWT_EXPIRES_IN: '' })).jwtTtlSeconds).toBe(30 * 86400);
  });

  it('refuses a bad JWT_EXPIRES_IN', () => {
    for (const raw of ['0', '0d', '-5', 'abc', '10w', '1.5h', 'd', '99999999999999999999d']) {
      expect(configError(env({ JWT_EXPIRES_IN: raw })).message, raw).toContain('JWT_EXPIRES_IN');
    }
  });

  it('reads ACCOUNT_DELETION_GRACE, 0 (purge at once) included, while other durations still refuse 0', () => {
    expect(loadConfig(env({ ACCOUNT_DELETION_GRACE: '0' })).lifecycle.deletionGraceMs).toBe(0);
    expect(loadConfig(env({ ACCOUNT_DELETION_GRACE: '0d' })).lifecycle.deletionGraceMs).toBe(0);
    expect(loadConfig(env({ ACCOUNT_DELETION_GRACE: '7d' })).lifecycle.deletionGraceMs).toBe(7 * 86_400_000);
    for (const raw of ['-1', 'soon', '1.5d', '99999999999999999999d']) {
      expect(configError(env({ ACCOUNT_DELETION_GRACE: raw })).message, raw).toContain('ACCOUNT_DELETION_GRACE');
    }
    expect(configError(env({ EVENT_RETENTION: '0' })).message).toContain('EVENT_RETENTION');
  });

  it('exposes the duration parser with the variable name in its errors', () => {
    expect(parseDuration('2h', 'X')).toBe(7200);
    expect(() => parseDuration('soon', 'TOKEN_TTL')).toThrow(/TOKEN_TTL/);
  });

  // ---------------------------------------------------------------- CORS

  it('allows any origin by default and reads CORS_ORIGINS as a list', () => {
    expect(loadConfig(env({ CORS_ORIGINS: '*' })).corsOrigins).toBe(true);
    expect(loadConfig(env({ CORS_ORIGINS: '  ' })).corsOrigins).toBe(true);
    expect(loadConfig(env({ CORS_ORIGINS: 'https://a.example, http://b.example:8080' })).corsOrigins).toEqual([
      'https://a.example',
      'http://b.example:8080',
    ]);
  });

  it('refuses CORS_ORIGINS entries that are not bare origins', () => {
    for (const raw of ['https://a.example/path', 'a.example', 'ftp://a.example']) {
      expect(configError(env({ CORS_ORIGINS: raw })).message, raw).toContain('CORS_ORIGINS');
    }
  });

  // ---------------------------------------------------------------- several bad values

  it('reports every bad value at once, one line each, and generates no secret for a rejected configuration', () => {
    const error = rejected({
      DATA_DIR: dataDir,
      NODE_ENV: 'staging',
      PORT: 'eighty',
      LOG_LEVEL: 'loud',
      DATABASE_URL: 'mysql://localhost/conduit',
      JWT_EXPIRES_IN: 'forever',
      CORS_ORIGINS: 'a.example, https://ok.example, ftp://b.example',
    });
    const expected = ['NODE_ENV', 'PORT', 'LOG_LEVEL', 'DATABASE_URL', 'JWT_EXPIRES_IN', 'CORS_ORIGINS', 'CORS_ORIGINS'];
    expect(error.problems.map((problem) => problem.split(' ')[0])).toEqual(expected);
    expect(error.problems.join()).toContain('"a.example"');
    expect(error.problems.join()).toContain('"ftp://b.example"');
    const lines = error.message.split('\n');
    expect(lines[0]).toBe('7 problems:');
    expect(lines.slice(1)).toEqual(error.problems.map((problem) => `  ${problem}`));
    expect(existsSync(path.join(dataDir, 'jwt-secret'))).toBe(false);
  });

  it('reports a missing production secret next to the other problems', () => {
    const error = rejected({ DATA_DIR: dataDir, NODE_ENV: 'production', PORT: '-1' });
    expect(error.problems.map((problem) => problem.split(' ')[0])).toEqual(['PORT', 'JWT_SECRET']);
  });
});

describe('the .env file', () => {
  let dir = '';
  const envFile = () => path.join(dir, '.env');

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'conduit-dotenv-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('adds its variables to the environment, and a variable set in both keeps its real value', () => {
    writeFileSync(
      envFile(),
      ['# local settings', 'PORT=4100', 'LOG_LEVEL=debug', `JWT_SECRET="${SECRET}"`, 'CORS_ORIGINS=https://app.example', ''].join('\n'),
    );
    const env = readEnvironment(envFile(), { PORT: '4200', DATA_DIR: dir });
    expect(env).toEqual({ PORT: '4200', LOG_LEVEL: 'debug', JWT_SECRET: SECRET, CORS_ORIGINS: 'https://app.example', DATA_DIR: dir });
    expect(loadConfig(env)).toMatchObject({ port: 4200, logLevel: 'debug', jwtSecret: SECRET, corsOrigins: ['https://app.example'] });
  });

  it('is optional', () => {
    const real = { PORT: '4300' };
    expect(readEnvironment(envFile(), real)).toBe(real);
  });

  it('stops the start when it exists but cannot be read', () => {
    mkdirSync(envFile());
    expect(() => readEnvironment(envFile(), {})).toThrow(ConfigError);
  });

  it('is read from the working directory when loadConfig is given no environment', () => {
    writeFileSync(envFile(), `PORT=4400\nDATA_DIR=${dir}\nJWT_SECRET=${SECRET}\n`);
    const cwd = process.cwd();
    const saved = { PORT: process.env.PORT, DATA_DIR: process.env.DATA_DIR, JWT_SECRET: process.env.JWT_SECRET };
    process.chdir(dir);
    try {
      delete process.env.PORT;
      delete process.env.DATA_DIR;
      delete process.env.JWT_SECRET;
      expect(loadConfig()).toMatchObject({ port: 4400, dataDir: dir, jwtSecret: SECRET });
      process.env.PORT = '4500';
      expect(loadConfig().port).toBe(4500);
    } finally {
      process.chdir(cwd);
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describe('the settings schema', () => {
  it('documents every setting and gives each one without a default a description of what unset means', () => {
    for (const name of SETTING_NAMES) {
      const schema = settingSchemas[name];
      expect(schema.description, name).toMatch(/\S{3}/);
      if (schema.default === undefined) expect(schema.description, name).toMatch(/unset/i);
    }
  });

  it('names the allowed values of a refused choice', () => {
    expect(rejected({ JWT_SECRET: SECRET, LOG_LEVEL: 'loud' }).message).toBe(
      'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    );
  });

  it('treats an empty variable as unset, so a blank line in a compose file keeps the default', () => {
    expect(loadConfig({ JWT_SECRET: SECRET, DATA_DIR: tmpdir(), NODE_ENV: '', LOG_LEVEL: ' ' })).toMatchObject({
      env: 'development',
      logLevel: 'info',
    });
  });
});

describe('a data folder that cannot be written', () => {
  let dir = '';

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'conduit-unwritable-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops the generated secret with a SettingError naming DATA_DIR and how to fix it', () => {
    // A folder under a regular file: refused with ENOTDIR even for root, which ignores permission bits.
    const file = path.join(dir, 'a-file');
    writeFileSync(file, '');
    let caught: unknown;
    try {
      loadConfig({ DATA_DIR: path.join(file, 'data') });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(SettingError);
    expect((caught as SettingError).message).toMatch(
      /^DATA_DIR: cannot write the generated JWT secret to .*a-file\/data \(.+\); .*JWT_SECRET$/,
    );
  });
});
