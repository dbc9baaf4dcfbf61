import BetterSqlite3 from 'better-sqlite3';
import { openDatabase } from '../src/db/index.js';
import { listArticles } from '../src/modules/articles/list.js';
const file = process.argv[2]!;
const handle = openDatabase({ kind: 'sqlite', file, synchronous: 'full' } as any);
const seen: { sql: string; parameters: readonly unknown[] }[] = [];
const db = handle.db.withPlugin({ transformQuery: (a) => a.node, transformResult: async (a) => a.result } as any);
const orig = (handle.db as any).getExecutor();
const ex = orig.executeQuery.bind(orig);
(orig as any).executeQuery = (q: any, id: any) => { seen.push(q); return ex(q, id); };
await listArticles(handle.db, {}, { limit: 20, offset: 0 }, null);
const raw = new BetterSqlite3(file, { readonly: true });
for (const q of seen) {
  console.log(q.sql, q.parameters);
  const st = raw.prepare(q.sql); const N = 3000;
  const t = performance.now(); for (let i = 0; i < N; i++) st.all(...(q.parameters as any[]));
  console.log('µs', ((performance.now() - t) / N * 1000).toFixed(1));
  console.log(raw.prepare('explain query plan ' + q.sql).all(...(q.parameters as any[])).map((r: any) => r.detail).join(' | '));
}
