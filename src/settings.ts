import { isIP } from 'node:net';
import { type Static, type TSchema, Type } from 'typebox';

/*
 * Every environment variable the server reads, in one JSON schema: its type, default, allowed values and the
 * description that README.md's settings table and .env.example are generated from (npm run docs:settings).
 * `errorMessage` says what a refused value should have been, where Ajv's own words ("must match pattern
 * ...") would not help an operator; `writeOnly` marks values that may hold a password and are never echoed.
 * Comma-separated lists are arrays: the reader splits them, so each bad entry is reported on its own.
 * The order is the order of the table and of the problems reported at start.
 */

export const MIN_SECRET_LENGTH = 32;

/** Seconds, or a number with a unit; at most nine digits, so that any value converts to milliseconds exactly. */
const DURATION_PATTERN = String.raw`^\s*0*[1-9]\d{0,8}\s*[smhd]?\s*$`;
const DURATION_OR_ZERO_PATTERN = String.raw`^\s*(?:0+|0*[1-9]\d{0,8})\s*[smhd]?\s*$`;

/** `zero`: a duration where 0 means "at once" rather than a mistake. */
const duration = (fallback: string, description: string, { zero = false } = {}) =>
  Type.String({
    default: fallback,
    pattern: zero ? DURATION_OR_ZERO_PATTERN : DURATION_PATTERN,
    errorMessage: `must be a duration such as 3600, 90m, 12h or 30d${zero ? ', or 0' : ''}`,
    description,
  });

/** A limit or threshold where 0 turns the check off. */
const count = (fallback: number, description: string) =>
  Type.Integer({
    default: fallback,
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    errorMessage: 'must be a whole number, 0 for no limit',
    description,
  });

const positive = (fallback: number, description: string) =>
  Type.Integer({
    default: fallback,
    minimum: 1,
    maximum: Number.MAX_SAFE_INTEGER,
    errorMessage: 'must be a positive whole number',
    description,
  });

/** A path on the frontend, relative to `FRONTEND_URL`, with `{name}` where the URL-encoded value goes. */
const pathTemplate = (fallback: string, name: string, what: string) =>
  Type.String({
    default: fallback,
    pattern: `^/.*\\{${name}\\}`,
    errorMessage: `must start with / and hold {${name}}`,
    description: `${what}, after \`FRONTEND_URL\`; \`{${name}}\` stands for the URL-encoded ${name}`,
  });

/** Whole seconds, 0 included, for values that go into a header as they are (Cache-Control). */
const seconds = (fallback: number, description: string) =>
  Type.Integer({
    default: fallback,
    minimum: 0,
    maximum: 31_536_000,
    errorMessage: 'must be a whole number of seconds, at most a year',
    description,
  });

const isPostgresUrl = (value: string) => /^postgres(ql)?:\/\//.test(value) && URL.canParse(value);

/** Formats the schema names whose check is more than a pattern; registered with the validator by name. */
export const SETTING_FORMATS = {
  'database-url': (value: string) => /^sqlite:.+/.test(value) || isPostgresUrl(value),
  'postgres-url': (value: string) => isPostgresUrl(value),
  'redis-url': (value: string) => /^rediss?:\/\//.test(value) && URL.canParse(value),
  'http-url': (value: string) => /^https?:\/\//.test(value) && URL.canParse(value),
  /** A hop count, or addresses and CIDR ranges, comma-separated. */
  'trust-proxy': (value: string) =>
    /^\s*\d+\s*$/.test(value) || value.split(',').every((entry) => isIP(entry.trim().replace(/\/\d{1,3}$/, '')) !== 0),
};

export const SETTINGS = Type.Object(
  {
    NODE_ENV: Type.Enum(['development', 'production', 'test'], {
      default: 'development',
      description: 'the environment the server runs in (`production` requires `JWT_SECRET`)',
    }),
    PORT: Type.Integer({
      default: 3000,
      minimum: 0,
      maximum: 65535,
      errorMessage: 'must be a port number from 0 to 65535',
      description: 'TCP port',
    }),
    HOST: Type.String({ default: '127.0.0.1', description: 'interface to listen on (`0.0.0.0` in a container)' }),
    LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      default: 'info',
      description: 'the least severe log lines written',
    }),
    DATA_DIR: Type.String({ default: './data', description: 'where the default SQLite file and the generated secret live' }),
    DATABASE_URL: Type.Optional(
      Type.String({
        format: 'database-url',
        writeOnly: true,
        errorMessage: 'must be sqlite:<path> (e.g. sqlite:./data/conduit.db) or a postgres:// URL',
        description:
          '`sqlite:<path>` for a SQLite file there, `postgres://user:pass@host:5432/db` for PostgreSQL; migrated on start either ' +
          'way. Unset: `conduit.db` in `DATA_DIR`',
      }),
    ),
    SQLITE_SYNCHRONOUS: Type.Enum(['full', 'normal'], {
      default: 'full',
      description:
        'on SQLite, `full` writes each commit through to the disk before the request is answered. `normal` skips that ' +
        'sync (faster writes): the database never corrupts and survives a crash of the server process, but a power loss ' +
        'or OS crash can undo the last commits the server had already answered as done',
    }),
    DATABASE_POOL_SIZE: positive(10, 'PostgreSQL connections per process; a quarter of them (at least one) kept for requests that write'),
    DATABASE_CONNECT_TIMEOUT: duration('5s', 'how long a request waits for a PostgreSQL connection before it is answered 503'),
    DATABASE_STATEMENT_TIMEOUT: duration(
      '5s',
      'how long a statement the server sends PostgreSQL may run, time spent waiting for locks included (`statement_timeout` ' +
        'on its connections, for requests and background work alike); past it PostgreSQL cancels it and the request is ' +
        'answered 503 with `Retry-After`. Migrations, at start or by `conduit migrate`, account purges and the other `conduit` commands ' +
        'run without it. `0`: none. Not sent through a pooler (`DATABASE_DIRECT_URL` set apart), which refuses it: set it ' +
        "on the pooler's connections instead (docs/DEPLOY.md)",
      { zero: true },
    ),
    DATABASE_PREPARED_STATEMENTS: Type.Enum(['on', 'off'], {
      default: 'on',
      description:
        '`on` sends the statements the server runs most as named (prepared) statements, parsed and planned once per ' +
        'connection; `off` sends every statement unnamed, for a pooler in transaction mode that cannot keep them ' +
        '(PgBouncer before 1.21, or without `max_prepared_statements`)',
    }),
    DATABASE_DIRECT_URL: Type.Optional(
      Type.String({
        format: 'postgres-url',
        writeOnly: true,
        errorMessage: 'must be a postgres:// URL',
        description:
          '`postgres://` URL straight to the database, when `DATABASE_URL` goes through a pooler in transaction mode ' +
          "(PgBouncer): what needs a session of its own uses it, the live event stream's LISTEN, the migrations and the " +
          '`conduit` commands. Set apart from `DATABASE_URL`, it tells the server a pooler is in front (docs/DEPLOY.md, ' +
          'PgBouncer). Unset: `DATABASE_URL`',
      }),
    ),
    DATABASE_REPLICA_URLS: Type.Array(Type.String({ format: 'postgres-url' }), {
      default: [],
      writeOnly: true,
      errorMessage: 'must be comma-separated postgres:// URLs',
      description:
        'comma-separated `postgres://` URLs of streaming replicas of DATABASE_URL: reads outside a transaction go to one that ' +
        "is healthy and has replayed the reader's own last write (kept in Redis: without REDIS_URL, signed-in reads stay on " +
        'the primary); writes, transactions and LISTEN stay on the primary. Each replica gets a pool the size of the read pool',
    }),
    DATABASE_REPLICA_MAX_LAG: duration(
      '5s',
      'a replica further behind the primary than this is left out of reads (the primary answers them) until it catches up',
    ),
    JWT_SECRET: Type.Optional(
      Type.String({
        minLength: MIN_SECRET_LENGTH,
        writeOnly: true,
        errorMessage: `must be at least ${MIN_SECRET_LENGTH} characters long`,
        description:
          `HS256 signing secret, at least ${MIN_SECRET_LENGTH} characters; **required** when \`NODE_ENV=production\`. ` +
          'Unset otherwise: generated once into `DATA_DIR/jwt-secret`',
      }),
    ),
    JWT_EXPIRES_IN: duration('30d', 'token lifetime: seconds, or a number with `s`, `m`, `h`, `d`'),
    CORS_ORIGINS: Type.Array(
      Type.String({
        pattern: String.raw`^(\*|https?://[^/\s]+)$`,
        errorMessage: 'entries must look like https://example.com (no path)',
      }),
      {
        default: ['*'],
        description: 'comma-separated origins allowed to call the API from a browser, e.g. `https://app.example.com`; `*` allows any',
      },
    ),
    SHARED_CACHE_MAX_AGE: seconds(
      5,
      'seconds a shared cache (CDN, proxy) may serve an anonymous GET answer without asking again (`s-maxage` in ' +
        '`Cache-Control`, `max-age` in `CDN-Cache-Control` and `Surrogate-Control`); browsers revalidate every time, and ' +
        'answers to a signed-in request are `private`, whatever this says. `0`, with ' +
        '`SHARED_CACHE_STALE_WHILE_REVALIDATE=0`: shared caches revalidate every time too',
    ),
    SHARED_CACHE_STALE_WHILE_REVALIDATE: seconds(
      30,
      'seconds past `SHARED_CACHE_MAX_AGE` a CDN may still serve an anonymous answer while it revalidates it in the ' +
        'background (`stale-while-revalidate` in `CDN-Cache-Control` and `Surrogate-Control` only, never in ' +
        '`Cache-Control`, which browsers read too): how stale an anonymous reader behind a CDN can see the site',
    ),
    WORKERS: positive(1, 'server processes sharing the port (node:cluster), same as `conduit serve --workers N`'),
    TRUST_PROXY: Type.Optional(
      Type.String({
        format: 'trust-proxy',
        errorMessage: 'must be a number of proxies or their addresses (10.0.0.1, 10.0.0.0/8)',
        description:
          'the proxies in front, whose `X-Forwarded-For` names the client: how many (`1` behind one load balancer) or their ' +
          'addresses and ranges (`10.0.0.0/8,10.1.2.3`). Unset or `0`, the connecting address is the client. Needed behind a ' +
          "proxy, or every client shares the proxy's limits",
      }),
    ),
    METRICS_TOKEN: Type.Optional(
      Type.String({
        minLength: MIN_SECRET_LENGTH,
        maxLength: 1024,
        pattern: String.raw`^\S+$`,
        writeOnly: true,
        errorMessage: `must be ${MIN_SECRET_LENGTH} to 1,024 characters without spaces`,
        description:
          'set: `GET /metrics` asks every client, this host included, for it as a bearer token (`Authorization: Bearer ' +
          '<token>`; Prometheus: `authorization.credentials_file`). Unset: `/metrics` answers only requests from this host (loopback) ' +
          'that carry no `Forwarded`, `X-Forwarded-For` or `X-Real-IP`, and 403 to any other',
      }),
    ),
    RATE_LIMIT_MAX: count(
      600,
      'requests per client address per `RATE_LIMIT_WINDOW`, on every route but the health probes and `/metrics`; `0` turns the limit off',
    ),
    RATE_LIMIT_WINDOW: duration('1m', 'a duration, written like `JWT_EXPIRES_IN`'),
    WRITE_RATE_LIMIT_MAX: count(
      120,
      'units of writing (every method but GET, HEAD and OPTIONS) per signed-in account per `RATE_LIMIT_WINDOW`, from any ' +
        'address: one per request plus one per 64 KiB of body (17 when its size is unknown), spent before the body is read; `0` off',
    ),
    AUTH_RATE_LIMIT_MAX: count(
      10,
      'failed logins per account (its email, in any case) per `AUTH_RATE_LIMIT_WINDOW`, logins still being checked counted with them; ' +
        'past it, logins to that account get 429 until the window ends, right password or not, except from devices it signed ' +
        'in from before (`KNOWN_DEVICE_EXPIRES_IN`); `0` off',
    ),
    AUTH_ADDRESS_RATE_LIMIT_MAX: count(
      100,
      'registrations and logins, whatever their outcome, per client address per `AUTH_RATE_LIMIT_WINDOW`; `0` off',
    ),
    AUTH_RATE_LIMIT_WINDOW: duration('15m', 'a duration'),
    KNOWN_DEVICE_EXPIRES_IN: duration(
      '90d',
      'lifetime of the known-device value each successful login hands out (`Known-Device` header and cookie): sent back ' +
        "at login, it lets the account's owner past a lock that others' failed logins put on the account, with failures " +
        'of its own counted per device against `AUTH_RATE_LIMIT_MAX`',
    ),
    REDIS_URL: Type.Optional(
      Type.String({
        format: 'redis-url',
        writeOnly: true,
        errorMessage: 'must be a redis:// or rediss:// URL',
        description:
          "`redis://[:password@]host:6379[/db]` or `rediss://`: the limits' counters, shared by every process and instance. " +
          "Unset, each instance counts on its own, its `WORKERS` together in the cluster's primary. Must answer at start",
      }),
    ),
    REDIS_KEY_PREFIX: Type.String({
      default: 'conduit:',
      description: 'start of every key written to Redis, so that deployments can share one Redis',
    }),
    HEADERS_TIMEOUT: duration('10s', 'time a client has to send its request line and headers; then 408 and the connection is closed'),
    REQUEST_TIMEOUT: duration('30s', 'time a client has to send its whole request, body included (at least `HEADERS_TIMEOUT`)'),
    KEEP_ALIVE_TIMEOUT: duration(
      '72s',
      "an idle kept-alive connection is closed after this; keep it above the load balancer's idle timeout (60 s on AWS ALB) " +
        'so that the balancer, not the server, closes first',
    ),
    CONNECTION_TIMEOUT: duration(
      '60s',
      'a connection on which nothing moves for this long while a request is open (a client that stopped reading) is closed',
    ),
    OVERLOAD_EVENT_LOOP_DELAY_MS: count(
      1000,
      "requests get 503 while the event loop's mean delay over the last second is above this; `0` off",
    ),
    EVENT_RETENTION: duration(
      '30d',
      'events older than this are deleted, once no webhook delivery of theirs is still pending; a client resuming the live ' +
        'stream from an older event starts at the oldest one kept',
    ),
    NOTIFICATION_RETENTION: duration('90d', 'notifications older than this are deleted once their recipient has read them'),
    OVERLOAD_RSS_MB: count(
      0,
      "requests get 503 while the process's resident memory is above this many MiB; set it somewhat below the container's " +
        'memory limit; `0` off',
    ),
    WEBHOOKS_DELIVERY: Type.Enum(['on', 'off'], {
      default: 'on',
      description:
        'whether this process sends the webhook deliveries that writes queue; `off` leaves them to the processes that do ' +
        '(any number may, on one database: each delivery is claimed by one)',
    }),
    SCHEDULED_PUBLISHING: Type.Enum(['on', 'off'], {
      default: 'on',
      description:
        'whether this process records the publication of scheduled articles when their time comes (their event, webhooks and ' +
        'counts); readers see them at their `publishAt` either way. Any number of processes may, on one database: each ' +
        'publication is recorded by one. `off` leaves it to the others: at least one process must have it on',
    }),
    ACCOUNT_DELETION_GRACE: duration(
      '30d',
      'how long an account whose owner asked to delete it (`DELETE /api/user`) waits, hidden from everyone else, before it ' +
        'is purged; the owner may cancel until then. `0` purges at once. Every process runs the purge; each account is ' +
        'purged by one',
      { zero: true },
    ),
    WEBHOOK_TIMEOUT: duration(
      '10s',
      'time one webhook attempt may take, from resolving the host to the end of the answer; longer counts as a failure',
    ),
    WEBHOOK_RETRY_FOR: duration(
      '24h',
      'how long a failing webhook delivery is retried, from when it was queued (waits from 5 s doubling up to 1 h); then it ' +
        'is given up, its endpoint disabled and the owner notified',
    ),
    WEBHOOK_ALLOW_LOOPBACK: Type.Boolean({
      default: false,
      errorMessage: 'must be true or false',
      description:
        'lets webhook endpoints be on this host (127.0.0.0/8, `::1`, `localhost`), for tests and local development; private, ' +
        'link-local and metadata addresses stay refused either way',
    }),
    EVENT_STREAMS_PER_CLIENT: count(
      5,
      'live event streams (`GET /api/events`) one client address may hold open at once, counted where the rate limits count: ' +
        'across the `WORKERS`, and across instances with `REDIS_URL`; past it, 429; `0` off',
    ),
    SEARCHES_PER_CLIENT: count(
      2,
      'searches (`GET /api/articles?q=`) one client (a signed-in account, else an address) may have running or waiting at ' +
        'once in each process, where searches take turns client by client; past it, 429; `0` off',
    ),
    EVENT_STREAMS_MAX: count(1000, 'live event streams open at once in each process; past it, 503; `0` off'),
    EVENT_STREAMS_BUFFER_MB: positive(
      64,
      'MiB of events waiting to be sent that all the live event streams of a process may hold together; past it the streams ' +
        'holding the most are disconnected first (each is also disconnected past 4 MiB of its own); they resume with ' +
        '`Last-Event-ID`',
    ),
    EVENT_REPLAY_MAX_EVENTS: positive(
      10_000,
      'events a resuming live stream reads from the outbox in one request, whether its filters keep them or not; past it, ' +
        'or past `EVENT_REPLAY_MAX_MB` sent, the stream gives the client the event id it got to and ends, and the client ' +
        'resumes from there',
    ),
    EVENT_REPLAY_MAX_MB: positive(16, 'MiB of missed events a resuming live stream sends in one request (see `EVENT_REPLAY_MAX_EVENTS`)'),
    EVENT_STREAM_HEARTBEAT: duration(
      '15s',
      'how often an idle event stream gets a comment line, so that proxies keep it open; shorter than `CONNECTION_TIMEOUT`, ' +
        'which closes a stream whose client stopped reading',
    ),
    FRONTEND_URL: Type.String({
      default: 'http://localhost:4200',
      format: 'http-url',
      errorMessage: 'must be an http:// or https:// URL',
      description:
        'where the frontend that shows the articles is: the feeds (`/feeds/...`) link every article, author and tag there, ' +
        'and their item ids are made from its host name. Set it in production; a frontend with hash routes wants ' +
        '`FRONTEND_ARTICLE_PATH=/#/article/{slug}` and the like',
    }),
    FRONTEND_ARTICLE_PATH: pathTemplate('/article/{slug}', 'slug', "an article's page on the frontend"),
    FRONTEND_PROFILE_PATH: pathTemplate('/profile/{username}', 'username', "an author's page on the frontend"),
    FRONTEND_TAG_PATH: pathTemplate('/?tag={tag}', 'tag', "a tag's articles on the frontend"),
    PUBLIC_URL: Type.Optional(
      Type.String({
        format: 'http-url',
        errorMessage: 'must be an http:// or https:// URL',
        description:
          "this server's own address as clients reach it (e.g. `https://api.example.com`), for the feeds' links to " +
          "themselves. Unset: taken from each request's `Host` (and, from the proxies `TRUST_PROXY` names, " +
          '`X-Forwarded-Host` and `X-Forwarded-Proto`)',
      }),
    ),
    SITE_NAME: Type.String({ default: 'Conduit', minLength: 1, maxLength: 128, description: 'the name the feeds give the site' }),
  },
  {
    additionalProperties: false,
    // Outside production a missing secret is generated; in production every instance must share one. NODE_ENV is
    // required by the condition so that it never holds vacuously, whether or not Ajv has filled in the default yet.
    if: { required: ['NODE_ENV'], properties: { NODE_ENV: { const: 'production' } } },
    // biome-ignore lint/suspicious/noThenProperty: `then` is JSON Schema's keyword here, never awaited.
    then: {
      required: ['JWT_SECRET'],
      errorMessage: `is required when NODE_ENV=production (use at least ${MIN_SECRET_LENGTH} random characters)`,
    },
  },
);

export type Settings = Static<typeof SETTINGS>;
export type SettingName = keyof Settings;

/** One setting's schema, with the annotations this project adds to JSON Schema. */
export type SettingSchema = TSchema & {
  type?: string;
  default?: unknown;
  description?: string;
  enum?: unknown[];
  writeOnly?: boolean;
  errorMessage?: string;
};

export const settingSchemas = SETTINGS.properties as Record<SettingName, SettingSchema>;
export const SETTING_NAMES = Object.keys(settingSchemas) as SettingName[];
