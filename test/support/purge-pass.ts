/**
 * One account purge pass as a process of its own, on DATABASE_URL: `node --import=tsx purge-pass.ts <now> <startAt>`
 * waits until `startAt` (epoch ms), so that several such processes run their passes at the same moment, runs the
 * pass as of `now`, and prints `{"purged": n, "waited": true}` (waited: it was ready before the moment). SQLite needs
 * processes for this: two connections of one process wait for each other's write lock on its one thread.
 */
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/index.js';
import { purgeDueAccounts } from '../../src/modules/users/purge.js';

const [now, startAt] = process.argv.slice(2).map(Number) as [number, number];
const database = openDatabase(loadConfig(process.env).database);
try {
  const waited = Date.now() < startAt;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
  process.stdout.write(JSON.stringify({ purged: await purgeDueAccounts(database.writer, now), waited }));
} finally {
  await database.destroy();
}
