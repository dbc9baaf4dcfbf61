// tsx .plan.ts DBFILE: time listArticles for a screening viewer and a plain one, and print the statements' plans
import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { openDatabase } from './src/db/index.js';
import { listArticles } from './src/modules/articles/list.js';
const file = '/tmp/plan.sqlite';
copyFileSync(process.argv[2]!, file);
const handle = openDatabase({ kind: 'sqlite', file, poolSize: 1 } as never);
const captured: string[] = [];
const db = handle.db.withPlugin({
  transformQuery: (args) => { captured.push(handle.db.getExecutor().compileQuery(args.node, args.queryId).sql); return args.node; },
  transformResult: async (args) => args.result,
});
const raw = new Database(file, { readonly: true });
const viewer = raw.prepare('select id from users where screened_count > 0 limit 1').get() as { id: number };
const ids = (raw.prepare('select blocked_id as id from blocks where blocker_id = ? union all select blocker_id from blocks where blocked_id = ? union all select muted_id from mutes where muter_id = ?').all(viewer.id, viewer.id, viewer.id) as any[]).map((r) => r.id);
const tag = raw.prepare('select name from tags order by article_count desc limit 1 offset 5').get() as { name: string };
const author = raw.prepare('select username from users where articles_count > 5 limit 1').get() as { username: string };
const cases: Array<[string, object, object]> = [
  ['global p1', {}, { limit: 20, offset: 0 }],
  ['global p10', {}, { limit: 20, offset: 180 }],
  ['tag', { tag: tag.name }, { limit: 20, offset: 20 }],
  ['author', { author: author.username }, { limit: 20, offset: 0 }],
  ['feed', { followedBy: viewer.id }, { limit: 20, offset: 60 }],
];
for (const [name, filters, page] of cases) {
  for (const screened of [false, true]) {
    const f = { ...filters, ...(screened && { screenedBy: { viewerId: viewer.id, authors: ids } }) };
    for (let i = 0; i < 200; i++) await listArticles(db, f, page as never, viewer.id);
    captured.length = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 1000; i++) await listArticles(db, f, page as never, viewer.id);
    const us = Number(process.hrtime.bigint() - t0) / 1000 / 1000;
    console.log(`${name.padEnd(12)} screened=${screened} ${us.toFixed(0)} µs/list`);
    if (screened && process.argv[3]) {
      const sqlText = captured[0]!;
      for (const row of raw.prepare(`explain query plan ${sqlText}`).all(...new Array((sqlText.match(/\?/g) ?? []).length).fill(1)) as any[]) console.log('   ', row.detail);
    }
  }
}
await handle.destroy();
