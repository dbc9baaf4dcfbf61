import { expect, it } from 'vitest';
import { describeEachDatabase } from './support/app.js';
import { createFixture, failureReport, fuzz, fuzzSeed } from './support/fuzz.js';

/** A slice of `npm run fuzz` (which runs 10,000 per database): the same generators and properties. */
const RUNS = 300;

describeEachDatabase('fuzz', (ctx) => {
  it(`keeps the contract over ${RUNS} generated hostile requests on every route`, { timeout: 120_000 }, async () => {
    const { app } = ctx();
    const { details } = await fuzz(app, await createFixture(app), { runs: RUNS, seed: fuzzSeed() });
    expect(details.failed, failureReport(details)).toBe(false);
  });
});
