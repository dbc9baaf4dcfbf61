import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BEHIND_POOLER, createScratchDatabase, directUrl, TEST_SECRET } from './support/app.js';
import { type Finished, freePort, runConduit, runNode, SERVER_ENTRY } from './support/processes.js';

/**
 * A setting that validates but does not work where the server runs must stop it with exit code 1 and one line
 * on stderr naming the setting, never a stack trace: that line is all an operator reading a deploy log gets.
 */

const POSTGRES_URL = process.env.TEST_DATABASE_URL;
// A stack in plain text or inside a JSON log line.
const STACK = /(\n|\\n)\s+at /;

let scratch = '';
/** Where nothing can be created, even by root (which ignores permission bits): a folder under a regular file. */
let underAFile = '';

beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'conduit-misconfigured-'));
  const file = path.join(scratch, 'a-file');
  writeFileSync(file, '');
  underAFile = path.join(file, 'data');
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** The server's environment with `settings` on top; nothing from this process's own. */
function serverEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    JWT_SECRET: TEST_SECRET,
    DATA_DIR: mkdtempSync(path.join(scratch, 'data-')),
    ...settings,
  };
}

const serve = (settings: Record<string, string>) => runNode(SERVER_ENTRY, [], serverEnv(settings));

function expectOneLine(result: Finished, line: RegExp): void {
  expect(`${result.stdout}${result.stderr}`).not.toMatch(STACK);
  expect(result.stderr).toMatch(/^[^\n]+\n$/);
  expect(result.stderr).toMatch(line);
  expect(result.code).toBe(1);
}

describe('a DATABASE_URL that does not lead to a database', () => {
  it('names the address nothing answers at', async () => {
    const port = await freePort();
    expectOneLine(
      await serve({ DATABASE_URL: `postgres://nobody@127.0.0.1:${port}/x` }),
      new RegExp(
        `^conduit: DATABASE_URL: cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${port} \\(connection refused\\); check the host and port`,
      ),
    );
  });

  it('says the same from the cluster primary, which migrates before it starts workers', async () => {
    const port = await freePort();
    expectOneLine(
      await serve({ DATABASE_URL: `postgres://nobody@127.0.0.1:${port}/x`, WORKERS: '2' }),
      /^conduit: DATABASE_URL: cannot connect to PostgreSQL at 127\.0\.0\.1:\d+ \(connection refused\)/,
    );
  });

  it('names a host that does not exist', async () => {
    expectOneLine(
      await serve({ DATABASE_URL: 'postgres://nobody@conduit-no-such-host.invalid/x' }),
      /^conduit: DATABASE_URL: cannot connect to PostgreSQL at conduit-no-such-host\.invalid \(host not found\)/,
    );
  });

  it('refuses a malformed URL before trying it, without echoing the password', async () => {
    const result = await serve({ DATABASE_URL: 'postgres://app:hunter2@[broken/conduit' });
    expectOneLine(result, /^conduit: configuration error: DATABASE_URL must be sqlite:<path> .* or a postgres:\/\/ URL$/m);
    expect(result.stderr).not.toContain('hunter2');
  });

  it.each(['migrate status', 'migrate up', 'migrate down', 'seed'])('stops `conduit %s` the same way', async (command) => {
    const port = await freePort();
    const result = await runConduit(command.split(' '), serverEnv({ DATABASE_URL: `postgres://nobody@127.0.0.1:${port}/x` }));
    expectOneLine(result, /^conduit: DATABASE_URL: cannot connect to PostgreSQL at 127\.0\.0\.1:\d+ \(connection refused\)/);
  });

  describe.skipIf(!POSTGRES_URL)('on a PostgreSQL server that answers', () => {
    // PostgreSQL's own answers: straight to it, past the suite's pooler if any.
    const withPath = (change: (url: URL) => void) => {
      const url = new URL(directUrl(POSTGRES_URL ?? ''));
      change(url);
      return url.toString();
    };

    it('names a database that does not exist', async () => {
      expectOneLine(
        await serve({ DATABASE_URL: withPath((url) => (url.pathname = '/conduit_no_such_database')) }),
        /^conduit: DATABASE_URL: PostgreSQL says database "conduit_no_such_database" does not exist; create it/,
      );
    });

    it('names a login the server refuses', async () => {
      expectOneLine(
        await serve({ DATABASE_URL: withPath((url) => (url.username = 'conduit_no_such_role')) }),
        /^conduit: DATABASE_URL: PostgreSQL refused the login: .*conduit_no_such_role.*; check the user name and password/,
      );
    });
  });

  describe.skipIf(!POSTGRES_URL)('behind a pooler (DATABASE_DIRECT_URL set apart)', () => {
    /** TEST_DATABASE_URL changed by `change`: through the suite's pooler when it runs behind one. */
    const pooled = (change: (url: URL) => void) => {
      const url = new URL(POSTGRES_URL ?? '');
      change(url);
      return url.toString();
    };

    it('names DATABASE_DIRECT_URL when that is the one that leads nowhere', async () => {
      const port = await freePort();
      expectOneLine(
        await serve({ DATABASE_URL: POSTGRES_URL ?? '', DATABASE_DIRECT_URL: `postgres://nobody@127.0.0.1:${port}/x` }),
        /^conduit: DATABASE_DIRECT_URL: cannot connect to PostgreSQL at 127\.0\.0\.1:\d+ \(connection refused\)/,
      );
    });

    it('names DATABASE_URL when its database does not exist, though the migrations ran on DATABASE_DIRECT_URL', async () => {
      const scratch = await createScratchDatabase('postgres');
      try {
        expectOneLine(
          await serve({
            DATABASE_URL: pooled((url) => (url.pathname = '/conduit_no_such_database')),
            DATABASE_DIRECT_URL: directUrl(scratch.url),
          }),
          /^conduit: DATABASE_URL: PostgreSQL says database "conduit_no_such_database" does not exist; create it/,
        );
      } finally {
        await scratch.drop();
      }
    });

    it.runIf(BEHIND_POOLER)('tells to set DATABASE_DIRECT_URL when PgBouncer refuses the statement timeout', async () => {
      expectOneLine(
        await serve({ DATABASE_URL: POSTGRES_URL ?? '' }),
        /^conduit: DATABASE_URL: the pooler says unsupported startup parameter: statement_timeout; set DATABASE_DIRECT_URL/,
      );
    });

    it.runIf(BEHIND_POOLER)('names a login PgBouncer refuses', async () => {
      expectOneLine(
        await serve({ DATABASE_URL: pooled((url) => (url.username = 'conduit_no_such_role')), DATABASE_STATEMENT_TIMEOUT: '0' }),
        /^conduit: DATABASE_URL: the pooler refused the login: .*authentication failed; check the user name and password/,
      );
    });
  });
});

describe('a data folder that cannot be written', () => {
  it('names DATA_DIR when the generated secret cannot be stored there', async () => {
    const { JWT_SECRET: _, ...settings } = serverEnv({ DATA_DIR: underAFile });
    const result = await runNode(SERVER_ENTRY, [], settings);
    expectOneLine(
      result,
      /^conduit: DATA_DIR: cannot write the generated JWT secret to .*a-file\/data \(.+\); point DATA_DIR at a writable folder/,
    );
  });

  it('names DATABASE_URL, and DATA_DIR, when the SQLite file cannot be created', async () => {
    expectOneLine(
      await serve({ DATA_DIR: underAFile }),
      /^conduit: DATABASE_URL: cannot write the SQLite database .*a-file\/data\/conduit\.db \(.+\); point DATABASE_URL, or DATA_DIR/,
    );
    expectOneLine(
      await serve({ DATABASE_URL: `sqlite:${path.join(underAFile, 'app.db')}` }),
      /^conduit: DATABASE_URL: cannot write the SQLite database .*a-file\/data\/app\.db/,
    );
  });

  // Root writes into a mode 0555 folder regardless, so this case can only be seen as another user.
  it.skipIf(process.getuid?.() === 0)('names DATABASE_URL when the folder is read-only', async () => {
    const readOnly = path.join(scratch, 'read-only');
    mkdirSync(readOnly);
    chmodSync(readOnly, 0o555);
    expectOneLine(
      await serve({ DATABASE_URL: `sqlite:${path.join(readOnly, 'app.db')}` }),
      /^conduit: DATABASE_URL: cannot write the SQLite database .*read-only\/app\.db/,
    );
  });
});

describe('a REDIS_URL that does not answer', () => {
  it('names the address, without the password and with no log line carrying a stack', async () => {
    const port = await freePort();
    const result = await serve({ REDIS_URL: `redis://:hunter2@127.0.0.1:${port}`, LOG_LEVEL: 'info' });
    expectOneLine(
      result,
      new RegExp(
        `^conduit: REDIS_URL: cannot connect to Redis at 127\\.0\\.0\\.1:${port} \\(connection refused\\); check the host and port`,
      ),
    );
    expect(`${result.stdout}${result.stderr}`).not.toContain('hunter2');
  });
});
