import BetterSqlite3 from 'better-sqlite3';
const raw = new BetterSqlite3(process.argv[2]!, { readonly: true });
const N = 5000;
function time(name: string, sql: string, params: unknown[] = []) {
  const st = raw.prepare(sql);
  st.all(...params);
  const t = performance.now();
  for (let i = 0; i < N; i++) st.all(...params);
  console.log(name.padEnd(40), ((performance.now() - t) / N * 1000).toFixed(1), 'µs');
}
const ids = `select id from articles order by created_at desc, id desc limit 20 offset 40`;
time('ids', ids);
time('cards no tags', `select a.slug,a.title,a.description,a.favorites_count,a.created_at,a.updated_at,u.username,u.bio,u.image from articles a join users u on u.id=a.author_id where a.id in (${ids}) order by a.created_at desc, a.id desc`);
time('cards + json tags', `select a.slug,a.title,a.description,a.favorites_count,a.created_at,a.updated_at,u.username,u.bio,u.image,(select json_group_array(t.name) from article_tags x join tags t on t.id=x.tag_id where x.article_id=a.id) from articles a join users u on u.id=a.author_id where a.id in (${ids}) order by a.created_at desc, a.id desc`);
time('cards + group_concat tags', `select a.slug,a.title,a.description,a.favorites_count,a.created_at,a.updated_at,u.username,u.bio,u.image,(select group_concat(t.name, char(31)) from article_tags x join tags t on t.id=x.tag_id where x.article_id=a.id) from articles a join users u on u.id=a.author_id where a.id in (${ids}) order by a.created_at desc, a.id desc`);
time('tags for 20 ids', `select x.article_id, t.name from article_tags x join tags t on t.id=x.tag_id where x.article_id in (${ids})`);
time('cards join (no IN)', `select a.slug,a.title,a.description,a.favorites_count,a.created_at,a.updated_at,u.username,u.bio,u.image from articles a join users u on u.id=a.author_id order by a.created_at desc, a.id desc limit 20 offset 40`);
time('flags', `select a.id, exists(select 1 from favorites f where f.user_id=5 and f.article_id=a.id), exists(select 1 from follows w where w.follower_id=5 and w.followed_id=a.author_id) from articles a where a.id in (${ids})`);
time('select 1', 'select 1');
