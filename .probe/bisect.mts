import BetterSqlite3 from 'better-sqlite3';
const raw = new BetterSqlite3(process.argv[2]!, { readonly: true });
const N = 3000;
function time(name: string, sql: string, params: unknown[] = []) {
  const st = raw.prepare(sql); st.all(...params);
  const t = performance.now();
  for (let i = 0; i < N; i++) st.all(...params);
  console.log(name.padEnd(30), ((performance.now() - t) / N * 1000).toFixed(1), 'µs');
}
const cols = `a.slug,a.title,a.description,a.favorites_count,a.created_at,a.updated_at,u.username,u.bio,u.image`;
time('base literal', `select ${cols} from articles a join users u on u.id=a.author_id where a.id in (select id from articles order by created_at desc, id desc limit 20 offset 0) order by a.created_at desc, a.id desc`);
time('base params', `select ${cols} from articles a join users u on u.id=a.author_id where a.id in (select id from articles order by created_at desc, id desc limit ? offset ?) order by a.created_at desc, a.id desc`, [20, 0]);
time('+tag_list', `select ${cols}, a.tag_list from articles a join users u on u.id=a.author_id where a.id in (select id from articles order by created_at desc, id desc limit 20 offset 0) order by a.created_at desc, a.id desc`);
time('+false flags', `select ${cols}, false as f, false as g from articles a join users u on u.id=a.author_id where a.id in (select id from articles order by created_at desc, id desc limit 20 offset 0) order by a.created_at desc, a.id desc`);
time('body only', `select length(a.body) from articles a where a.id in (select id from articles order by created_at desc, id desc limit 20 offset 0)`);
time('join form params', `select ${cols} from articles a join users u on u.id=a.author_id order by a.created_at desc, a.id desc limit ? offset ?`, [20, 0]);
time('join form literal', `select ${cols} from articles a join users u on u.id=a.author_id order by a.created_at desc, a.id desc limit 20 offset 0`);
time('ids params', `select id from articles order by created_at desc, id desc limit ? offset ?`, [20, 0]);
time('ids literal', `select id from articles order by created_at desc, id desc limit 20 offset 0`);
time('from-subquery params', `select ${cols} from (select id from articles order by created_at desc, id desc limit ? offset ?) p join articles a on a.id = p.id join users u on u.id=a.author_id order by a.created_at desc, a.id desc`, [20, 0]);
time('from-subquery literal', `select ${cols} from (select id from articles order by created_at desc, id desc limit 20 offset 0) p join articles a on a.id = p.id join users u on u.id=a.author_id order by a.created_at desc, a.id desc`);
