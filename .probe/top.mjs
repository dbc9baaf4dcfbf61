import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const self = new Map(); const byId = new Map(p.nodes.map(n => [n.id, n]));
const dt = p.timeDeltas; let total = 0;
const counts = new Map();
p.samples.forEach((id, i) => { counts.set(id, (counts.get(id) ?? 0) + (dt[i] ?? 0)); total += dt[i] ?? 0; });
for (const [id, t] of counts) { const n = byId.get(id); const cf = n.callFrame; const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*node_modules\//, '').replace(/.*\/work\/main\//, '')}:${cf.lineNumber}`; self.set(key, (self.get(key) ?? 0) + t); }
// by package
const pkg = new Map();
for (const [k, t] of self) { const m = k.match(/ ((?:@[^/]+\/)?[^/:]+)/); const key = m ? m[1] : k; pkg.set(key, (pkg.get(key) ?? 0) + t); }
console.log('total ms', (total/1000).toFixed(0));
console.log([...pkg].sort((a,b)=>b[1]-a[1]).slice(0,15).map(([k,t])=>`${(100*t/total).toFixed(1)}% ${k}`).join('\n'));
console.log('---');
console.log([...self].sort((a,b)=>b[1]-a[1]).slice(0,40).map(([k,t])=>`${(100*t/total).toFixed(1)}% ${k}`).join('\n'));
