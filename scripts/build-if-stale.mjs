// `npm start` runs this first: building takes seconds, and most starts follow no change to what the build reads.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** tsc rewrites every output on each build, so the entry's age is the age of the whole build. */
const BUILT_ENTRY = path.join('dist', 'server.js');
/** Besides everything under src/: the compiler settings, and package.json (its version is served, its type decides the module format). */
const TOP_LEVEL_INPUT = /^(tsconfig.*\.json|package\.json)$/;

function inputsOf(root) {
  const topLevel = readdirSync(root).filter((name) => TOP_LEVEL_INPUT.test(name));
  const sources = readdirSync(path.join(root, 'src'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)));
  return [...topLevel, ...sources];
}

/** Why the project in `root` needs building before it can start, or null when dist/ is newer than all it is built from. */
function buildReason(root) {
  let builtAt;
  try {
    builtAt = statSync(path.join(root, BUILT_ENTRY)).mtimeMs;
  } catch {
    return `${BUILT_ENTRY} does not exist yet`;
  }
  const changed = inputsOf(root).find((input) => statSync(path.join(root, input)).mtimeMs > builtAt);
  return changed === undefined ? null : `${changed} changed since the last build`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const reason = buildReason(process.cwd());
  if (reason !== null) {
    console.error(`conduit: building first: ${reason}`);
    // The package manager that runs `npm start` runs the build too; run by hand, npm from PATH.
    const packageManager = process.env.npm_execpath;
    const build = packageManager
      ? spawnSync(process.execPath, [packageManager, 'run', 'build'], { stdio: 'inherit' })
      : spawnSync('npm', ['run', 'build'], { stdio: 'inherit', shell: process.platform === 'win32' });
    process.exitCode = build.status ?? 1;
  }
}
