#!/usr/bin/env node
import { existsSync } from 'node:fs';

// dist/ is build output and not in the repository: a fresh clone needs one build before the first run.
const entry = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(entry)) {
  console.error('conduit: the command is not built yet; run `npm run build` in the project folder first');
  process.exit(1);
}
const { run } = await import(entry.href);
await run(process.argv.slice(2));
