import { expect, it } from 'vitest';
import { moveCounter, readCounter } from '../src/db/counters.js';
import { describeEachDatabase } from './support/app.js';

describeEachDatabase('shared counter reads', (ctx) => {
  const db = () => ctx().app.db;

  it('answers each counter by name, with every write committed before the call', async () => {
    const before = await Promise.all([readCounter(db(), 'content_version'), readCounter(db(), 'account_version')]);
    await moveCounter(db(), 'content_version', 5);
    await moveCounter(db(), 'account_version', 2);
    // Asked together, so that one read answers all three.
    const [content, account, articles] = await Promise.all([
      readCounter(db(), 'content_version'),
      readCounter(db(), 'account_version'),
      readCounter(db(), 'articles'),
    ]);
    expect([content, account]).toEqual([before[0] + 5, before[1] + 2]);
    expect(articles).toBe(0);
  });

  it('fails loudly when a counter row is missing, instead of freezing the caches built on it', async () => {
    await db().deleteFrom('counters').where('name', '=', 'tag_usage_version').execute();
    await expect(readCounter(db(), 'tag_usage_version')).rejects.toThrow(/no "tag_usage_version" row: is the database migrated\?/);
    // The other counters are still served.
    expect(await readCounter(db(), 'articles')).toBe(0);
  });
});
