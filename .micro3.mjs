import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
const db = new Database('/tmp/plan.sqlite', { readonly: true });
const kind = process.argv[2] ?? 'global';
const s = JSON.parse(readFileSync(`/tmp/stmt-${kind}-true.json`, 'utf8'));
const u = JSON.parse(readFileSync(`/tmp/stmt-${kind}-false.json`, 'utf8'));
const screenRe = /\(select "blocks"\."blocked_id" as "id" from "blocks" where "blocks"\."blocker_id" = \? union all select "blocks"\."blocker_id" as "id" from "blocks" where "blocks"\."blocked_id" = \? union all select "mutes"\."muted_id" as "id" from "mutes" where "mutes"\."muter_id" = \?\)/g;
const v = s.parameters[2];
const ids = db.prepare(`select blocked_id as id from blocks where blocker_id = ? union all select blocker_id from blocks where blocked_id = ? union all select muted_id from mutes where muter_id = ?`).all(v, v, v).map((r) => r.id);
// Every screened subquery as a literal list: what it costs apart from building the set.
let drop = 0;
const literal = s.sql.replace(screenRe, () => { drop += 3; return `(${ids.join(',') || 'null'})`; });
const jsonSql = s.sql.replace(screenRe, `(select value from json_each(?))`);
const paramsLiteral = []; { let i = 0; const parts = s.sql.split(screenRe); }
const variants = [['unscreened', u.sql, u.parameters], ['screened', s.sql, s.parameters]];
// params for literal/json: walk the sql and rebuild params: each screen subquery consumes 3 params
function rebuild(replacement) {
  const out = []; let pi = 0; let last = 0; const re = new RegExp(screenRe.source, 'g'); let m;
  const text = s.sql;
  while ((m = re.exec(text))) { const before = text.slice(last, m.index); const n = (before.match(/\?/g) || []).length; out.push(...s.parameters.slice(pi, pi + n)); pi += n + 3; if (replacement === 'json') out.push(JSON.stringify(ids)); last = m.index + m[0].length; }
  out.push(...s.parameters.slice(pi)); return out;
}
variants.push(['literal', literal, rebuild('literal')], ['json_each', jsonSql, rebuild('json')]);
const stmts = variants.map(([n, q, p]) => [n, db.prepare(q), p]);
const best = new Map();
for (let r = 0; r < 15; r++) for (const [n, st, p] of stmts) { const t0 = process.hrtime.bigint(); for (let i = 0; i < 200; i++) st.all(...p); const t = Number(process.hrtime.bigint() - t0) / 200 / 1000; best.set(n, Math.min(best.get(n) ?? Infinity, t)); }
for (const [n, t] of best) console.log(kind, n.padEnd(12), t.toFixed(1), 'µs');
