import Database from 'better-sqlite3';
const db = new Database('/tmp/plan.sqlite', { readonly: true });
const v = db.prepare('select id from users where screened_count > 0 limit 1').get().id;
const now = Date.now();
const variants = {
  plain: `select id from articles where listed_at <= cast(? as bigint) order by listed_at desc, id desc limit 21 offset 20`,
  notin: `select id from articles where listed_at <= cast(? as bigint) and author_id not in (select blocked_id from blocks where blocker_id = ${v} union all select blocker_id from blocks where blocked_id = ${v} union all select muted_id from mutes where muter_id = ${v}) order by listed_at desc, id desc limit 21 offset 20`,
  notexists: `select id from articles where listed_at <= cast(? as bigint)
     and not exists (select 1 from blocks where blocker_id = ${v} and blocked_id = articles.author_id)
     and not exists (select 1 from blocks where blocker_id = articles.author_id and blocked_id = ${v})
     and not exists (select 1 from mutes where muter_id = ${v} and muted_id = articles.author_id)
     order by listed_at desc, id desc limit 21 offset 20`,
  notin3: `select id from articles where listed_at <= cast(? as bigint)
     and author_id not in (select blocked_id from blocks where blocker_id = ${v})
     and author_id not in (select blocker_id from blocks where blocked_id = ${v})
     and author_id not in (select muted_id from mutes where muter_id = ${v})
     order by listed_at desc, id desc limit 21 offset 20`,
};
for (const [name, text] of Object.entries(variants)) {
  const st = db.prepare(text);
  let best = Infinity;
  for (let r = 0; r < 7; r++) { const t0 = process.hrtime.bigint(); for (let i = 0; i < 500; i++) st.all(now); best = Math.min(best, Number(process.hrtime.bigint() - t0) / 500 / 1000); }
  console.log(name.padEnd(10), best.toFixed(1), 'µs', st.all(now).length);
}
