import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
const db = new Database('/tmp/plan.sqlite', { readonly: true });
const time = (name, sql, params) => {
  const st = db.prepare(sql);
  let best = Infinity;
  for (let r = 0; r < 7; r++) { const t0 = process.hrtime.bigint(); for (let i = 0; i < 300; i++) st.all(...params); best = Math.min(best, Number(process.hrtime.bigint() - t0) / 300 / 1000); }
  console.log(name.padEnd(24), best.toFixed(1), 'µs');
};
const s = JSON.parse(readFileSync('/tmp/stmt-global-true.json', 'utf8'));
const u = JSON.parse(readFileSync('/tmp/stmt-global-false.json', 'utf8'));
time('unscreened', u.sql, u.parameters);
time('screened', s.sql, s.parameters);
console.log(s.parameters);
// screened count alone replaced by a constant
const noCount = s.sql.replace(/\(select sum\(article_totals.*?\) as "articles_count"/s, '0 as "articles_count"');
time('screened, no count', noCount, s.parameters.filter((_, i) => i < 2 || i > 4));
const ids = db.prepare(`select blocked_id as id from blocks where blocker_id = 1 union all select blocker_id from blocks where blocked_id = 1 union all select muted_id from mutes where muter_id = 1`).all().map((r) => r.id);
console.log('screened ids', ids.length);
const literal = s.sql.replace(/"articles"\."author_id" not in \(select "blocks".*?"mutes"\."muter_id" = \?\) order by/s, `"articles"."author_id" not in (${ids.join(',')}) order by`);
time('screened, literal list', literal, s.parameters.filter((_, i) => !(i >= 6 && i <= 8)));
const inner = s.sql.match(/"articles"\."id" in \((select "articles"\."id" from "articles" where .*? offset \?)\)/s)[1];
time('inner alone', inner, s.parameters.slice(5));
