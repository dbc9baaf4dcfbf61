import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { childEnv, request, SERVER_ENTRY, startServer } from './support/processes.js';

const STARTS = 20;

/**
 * better-sqlite3 12 aborted the process in most starts on Node 24 (`Assertion failed: (env) != nullptr`, from a
 * cleanup hook), so a start that works once proves little: the built server is started and stopped many times
 * in a row on whichever Node runs the tests (CI runs them on 22 and on 24), as a new user would start it: a fresh
 * data folder, a SQLite file created and migrated, a generated secret.
 */
describe(`the built server, started ${STARTS} times in a row`, () => {
  const folders: string[] = [];
  afterAll(() => {
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it(
    `serves and stops cleanly every time, on Node ${process.versions.node}`,
    async () => {
      const outcomes: string[] = [];
      for (let start = 0; start < STARTS; start++) {
        const folder = mkdtempSync(path.join(tmpdir(), 'conduit-starts-'));
        folders.push(folder);
        const { JWT_SECRET: _generatedInstead, ...env } = childEnv(`sqlite:${path.join(folder, 'conduit.db')}`, { DATA_DIR: folder });
        const server = await startServer(SERVER_ENTRY, [], env);
        const listed = await request(server.base, 'GET', '/api/articles');
        const code = await server.stop('SIGTERM');
        outcomes.push(`start ${start + 1}: GET /api/articles ${listed.status}, exit ${code}${code === 0 ? '' : `\n${server.output()}`}`);
      }
      expect(outcomes).toEqual(outcomes.map((_, i) => `start ${i + 1}: GET /api/articles 200, exit 0`));
    },
    STARTS * 10_000,
  );
});
