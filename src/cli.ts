import { Argument, Command, InvalidArgumentError, Option } from 'commander';
import { listEvents, replayEventDeliveries } from './cli/events.js';
import { migrateDown, migrateUp, migrationStatus } from './cli/migrate.js';
import { SEED_PASSWORD, SEED_SIZES, type SeedCounts, seedDatabase } from './cli/seed.js';
import { ConfigError, loadConfig } from './config.js';
import { blamingDirectUrl, directDatabase } from './db/direct.js';
import { type DatabaseHandle, openDatabase } from './db/index.js';
import { migrateToLatest } from './db/migrate.js';
import { ROLES, type Role } from './db/schema.js';
import { EVENT_TYPES, type EventType } from './modules/events/catalogue.js';

const ENVIRONMENT_HELP = `
Settings come from the same environment variables as the server (DATABASE_URL, JWT_SECRET, ...; see README.md).`;

const wholeNumber = (min: number) => (raw: string) => {
  if (!/^\d+$/.test(raw) || Number(raw) < min) throw new InvalidArgumentError(`expected a whole number, at least ${min}`);
  return Number(raw);
};

/**
 * Runs `work` against the configured database and always closes it, so the command can exit on its own. Without
 * DATABASE_STATEMENT_TIMEOUT, which is for requests: a migration or a seed of a large database runs for minutes.
 * Straight to PostgreSQL (DATABASE_DIRECT_URL), past any pooler: the migration lock is a session's.
 */
async function withDatabase<T>(work: (database: DatabaseHandle) => Promise<T>): Promise<T> {
  const config = loadConfig().database;
  const database = openDatabase(directDatabase(config));
  try {
    return await work(database);
  } catch (error) {
    throw blamingDirectUrl(config, error);
  } finally {
    await database.destroy();
  }
}

const printLines = (lines: string[]) => console.log(lines.join('\n'));

function program(): Command {
  const cli = new Command('conduit')
    .description('RealWorld (Conduit) API server: run it, migrate its database, fill it with demo data')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', ENVIRONMENT_HELP);

  cli
    .command('serve')
    .description('start the API server (what `npm start` runs); migrates the database first')
    .addOption(
      // The default comes from the validated config, so WORKERS also works from a .env file.
      new Option('-w, --workers <n>', 'server processes sharing the port (node:cluster), default WORKERS or 1').argParser(wholeNumber(1)),
    )
    .addHelpText(
      'after',
      `
With more than one worker, a primary process migrates once, then forks the workers and supervises them.
SIGTERM or SIGINT stops accepting connections, lets in-flight requests finish, and exits 0; an error that
nothing caught is logged at fatal and does the same, then exits 1.${ENVIRONMENT_HELP}`,
    )
    .action(async (options: { workers?: number }) => {
      const config = loadConfig();
      // Only serve needs the whole server (Fastify and every route): without it, migrate starts in 0.55 s instead of 0.8.
      const { serve } = await import('./cli/serve.js');
      return serve(config, options.workers ?? config.workers);
    });

  const migrate = cli
    .command('migrate')
    .description('apply, revert or list database migrations (SQLite or PostgreSQL, from DATABASE_URL)')
    .addHelpText('after', ENVIRONMENT_HELP);
  migrate
    .command('up')
    .description('apply every pending migration (safe to run while servers run: Kysely takes a migration lock)')
    .action(() => withDatabase(migrateUp).then(printLines));
  migrate
    .command('down')
    .description('revert the latest applied migration; reverting 0001_initial drops every table and its data')
    .action(() => withDatabase(migrateDown).then(printLines));
  migrate
    .command('status')
    .description('list every migration, applied (with when) or pending')
    .action(() => withDatabase(migrationStatus).then(printLines));

  const events = cli.command('events').description('read the outbox: what webhooks and the live stream deliver');
  events
    .command('list')
    .description('print events as JSON lines (the envelope consumers receive), oldest first')
    .option('--after <id>', 'only events after this id', wholeNumber(0), 0)
    .option('--limit <n>', 'at most this many', wholeNumber(1), 100)
    .addOption(new Option('--type <type>', 'only this event type').choices(EVENT_TYPES))
    // commander has checked --type against the choices.
    .action((options: { after: number; limit: number; type?: EventType }) =>
      withDatabase((database) => listEvents(database, options)).then(printLines),
    );

  events
    .command('replay <event-id>')
    .description("queue an event again for its owner's webhook endpoints (all that take its type, or the one given)")
    .option('--endpoint <id>', 'only this endpoint, whatever types it takes', wholeNumber(1))
    .action((eventId: string, options: { endpoint?: number }) =>
      withDatabase((database) => replayEventDeliveries(database, wholeNumber(1)(eventId), options.endpoint)).then(printLines),
    );

  cli
    .command('users')
    .description('manage accounts')
    .command('role <username>')
    .description("set an account's role (user, moderator or admin): how the first admin is made")
    .addArgument(new Argument('<role>').choices(ROLES))
    .action(async (username: string, role: Role) => {
      // As serve does: only this command loads the moderation code it needs.
      const { setUserRole } = await import('./cli/users.js');
      printLines(await withDatabase((database) => setUserRole(database, username, role)));
    });

  const seed = cli
    .command('seed')
    .description('fill the database with demo users, articles, tags, follows, favorites and comments')
    .addOption(new Option('-s, --size <size>', 'preset amounts, see below').choices(Object.keys(SEED_SIZES)).default('small'))
    .option('--seed-value <n>', 'random seed: the same value gives the same names, titles and links', wholeNumber(0));
  for (const count of ['users', 'articles', 'comments', 'follows', 'favorites'] as const) {
    seed.option(`--${count} <n>`, `number of ${count} (overrides --size)`, wholeNumber(0));
  }
  const presets = Object.entries(SEED_SIZES)
    .map(
      ([name, counts]) =>
        `  ${name.padEnd(7)} ${Object.entries(counts)
          .map(([what, n]) => `${n} ${what}`)
          .join(', ')}`,
    )
    .join('\n');
  seed
    .addHelpText(
      'after',
      `
Sizes:
${presets}

Every seeded user signs in with the password "${SEED_PASSWORD}" (emails are <username>@example.com, lower case).
Everything is written in one transaction; on top of existing data, names and slugs continue the numbering.${ENVIRONMENT_HELP}`,
    )
    .action(async (options: { size: keyof typeof SEED_SIZES; seedValue?: number } & Partial<SeedCounts>) => {
      const counts = { ...SEED_SIZES[options.size] };
      for (const key of Object.keys(counts) as (keyof SeedCounts)[]) counts[key] = options[key] ?? counts[key];
      // Only the seed command draws a progress bar; the server does not load it.
      const { SingleBar } = await import('cli-progress');
      const bar = new SingleBar({ format: 'seeding [{bar}] {percentage}% | {value}/{total} rows | {duration_formatted}' });
      bar.start(
        Object.values(counts).reduce((sum, n) => sum + n, 0),
        0,
      );
      const result = await withDatabase(async (database) => {
        // Like the server: a fresh database gets its tables first.
        await migrateToLatest(database);
        return seedDatabase(database.db, { ...counts, seedValue: options.seedValue }, (rows) => bar.increment(rows));
      }).finally(() => bar.stop());
      printLines([
        `seeded ${result.users} users, ${result.articles} articles (${result.articleTags} tag links on ${result.tags} tags), ` +
          `${result.follows} follows, ${result.favorites} favorites, ${result.comments} comments`,
        `seed value ${result.seedValue} (pass --seed-value ${result.seedValue} to repeat)`,
        ...(result.sampleEmail ? [`sign in as ${result.sampleEmail} / ${SEED_PASSWORD}`] : []),
      ]);
    });

  return cli;
}

/** Entry point of the `conduit` command; `argv` without the node binary and script path. */
export async function run(argv: string[]): Promise<void> {
  try {
    await program().parseAsync(argv, { from: 'user' });
  } catch (error) {
    console.error(
      error instanceof ConfigError
        ? `conduit: configuration error: ${error.message}`
        : `conduit: ${error instanceof Error ? error.message : String(error)}`,
    );
    process.exit(1);
  }
}
