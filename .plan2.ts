import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { openDatabase } from './src/db/index.js';
import { listArticles } from './src/modules/articles/list.js';
const file = '/tmp/plan.sqlite';
copyFileSync(process.argv[2]!, file);
const handle = openDatabase({ kind: 'sqlite', file, poolSize: 1 } as never);
const captured: Array<{ sql: string; parameters: readonly unknown[] }> = [];
const db = handle.db.withPlugin({
  transformQuery: (args) => { const c = handle.db.getExecutor().compileQuery(args.node, args.queryId); captured.push({ sql: c.sql, parameters: c.parameters }); return args.node; },
  transformResult: async (args) => args.result,
});
const raw = new Database(file, { readonly: true });
const viewer = raw.prepare('select id from users where screened_count > 0 limit 1').get() as { id: number };
const tag = raw.prepare('select name from tags order by article_count desc limit 1 offset 5').get() as { name: string };
const ids = (raw.prepare('select blocked_id as id from blocks where blocker_id = ? union all select blocker_id from blocks where blocked_id = ? union all select muted_id from mutes where muter_id = ?').all(viewer.id, viewer.id, viewer.id) as any[]).map((r) => r.id);
const filters = process.argv[3] === 'tag' ? { tag: tag.name } : process.argv[3] === 'feed' ? { followedBy: viewer.id } : {};
for (const screened of [false, true]) {
captured.length = 0;
await listArticles(db, { ...filters, ...(screened && { screenedBy: { viewerId: viewer.id, authors: ids } }) }, { limit: 20, offset: 20 } as never, viewer.id);
console.log('screened', screened, 'statements', captured.length);
for (const c of captured.slice(-1)) {
  (await import('node:fs')).writeFileSync(`/tmp/stmt-${process.argv[3]}-${screened}.json`, JSON.stringify(c));
  const stmt = raw.prepare(c.sql);
  const params = c.parameters.map((p) => (typeof p === 'boolean' ? Number(p) : p));
  let best = Infinity;
  for (let r = 0; r < 5; r++) { const t0 = process.hrtime.bigint(); for (let i = 0; i < 300; i++) stmt.all(...params); best = Math.min(best, Number(process.hrtime.bigint() - t0) / 300 / 1000); }
  console.log(`  -> ${best.toFixed(0)} µs`);
  if (process.argv[4]) for (const row of raw.prepare(`explain query plan ${c.sql}`).all(...params) as any[]) console.log('   ', row.id, row.parent, row.detail);
}
}
await handle.destroy();
