import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map(n => [n.id, n]));
const parent = new Map(); for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const selfT = new Map(); let total = 0;
p.samples.forEach((id, i) => { const d = p.timeDeltas[i] ?? 0; selfT.set(id, (selfT.get(id) ?? 0) + d); total += d; });
const incl = new Map();
for (const [id, t] of selfT) { const seen = new Set(); let cur = id; while (cur !== undefined) { const cf = byId.get(cur).callFrame; const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*node_modules\//, '').replace(/.*\/work\/main\//, '')}`; if (!seen.has(key)) { incl.set(key, (incl.get(key) ?? 0) + t); seen.add(key); } cur = parent.get(cur); } }
console.log('total ms', (total / 1000).toFixed(0));
console.log([...incl].sort((a, b) => b[1] - a[1]).filter(([k]) => !/^\(root\)|^\(program\)/.test(k)).slice(0, 60).map(([k, t]) => `${(100 * t / total).toFixed(1)}% ${k}`).join('\n'));
