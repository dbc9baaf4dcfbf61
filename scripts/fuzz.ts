/**
 * `npm run fuzz`: FUZZ_RUNS generated requests (default 10,000) against the app on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set, each on a fresh database. FUZZ_SEED replays a run. Exits 1 on any counterexample.
 */
import { buildApp } from '../src/app.js';
import { createScratchDatabase, DATABASES, testConfig } from '../test/support/app.js';
import { createFixture, failureReport, fuzz, fuzzSeed } from '../test/support/fuzz.js';

const runs = Number(process.env.FUZZ_RUNS || 10_000);
if (!Number.isSafeInteger(runs) || runs < 1) throw new Error(`FUZZ_RUNS must be a positive integer, got "${process.env.FUZZ_RUNS}"`);
const seed = fuzzSeed();
console.log(`fuzz: ${runs} runs per database, seed ${seed} (replay with FUZZ_SEED=${seed})`);
if (!process.env.TEST_DATABASE_URL) console.log('fuzz: PostgreSQL skipped (set TEST_DATABASE_URL to fuzz it too)');

let failed = false;
for (const kind of DATABASES) {
  const scratch = await createScratchDatabase(kind);
  const app = await buildApp(testConfig(scratch.url));
  try {
    const started = Date.now();
    const { requests, statuses, details } = await fuzz(app, await createFixture(app), { runs, seed });
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(`fuzz [${kind}]: ${requests} requests, ${details.failed ? 1 : 0} failures (${seconds} s)`);
    const counts = [...statuses].sort(([a], [b]) => a - b).map(([status, count]) => `${status}: ${count}`);
    console.log(`  answers by status: ${counts.join(', ')}`);
    if (details.failed) {
      failed = true;
      console.log(failureReport(details));
    }
  } finally {
    await app.close();
    await scratch.drop();
  }
}
process.exitCode = failed ? 1 : 0;
