import { buildPlan, SCALES, VIEWERS, pickEvenly } from './scripts/bench/seed-data.js';
for (const name of ['small', 'medium', 'large'] as const) {
  const scale = (SCALES as any)[name]; if (!scale) continue;
  if (scale.articles > 200_000) { console.log(name, 'skipped'); continue; }
  const plan = buildPlan(scale);
  const viewers = pickEvenly(Array.from({ length: scale.users }, (_, u) => u), VIEWERS);
  const zero = viewers.filter((u) => plan.userArticles[u] === 0).length;
  console.log(name, 'users', scale.users, 'zero-article viewers', zero);
}
