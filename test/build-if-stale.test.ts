import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = path.resolve(import.meta.dirname, '../scripts/build-if-stale.mjs');

/**
 * A project shaped like this one whose build is a script that records each run, so that what `npm start` would do
 * is seen without rebuilding the real dist/ that other test files run.
 */
function fakeProject(): string {
  const root = mkdtempSync(path.join(tmpdir(), 'conduit-start-'));
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'fake', private: true, scripts: { build: 'node build.mjs' } }));
  writeFileSync(path.join(root, 'tsconfig.json'), '{}');
  writeFileSync(
    path.join(root, 'build.mjs'),
    `import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
mkdirSync('dist', { recursive: true });
writeFileSync('dist/server.js', '');
appendFileSync('builds.log', 'built\\n');`,
  );
  mkdirSync(path.join(root, 'src', 'modules'), { recursive: true });
  writeFileSync(path.join(root, 'src', 'modules', 'routes.ts'), 'export {};');
  return root;
}

const prestart = (root: string) => spawnSync(process.execPath, [SCRIPT], { cwd: root, env: { PATH: process.env.PATH }, encoding: 'utf8' });
const builds = (root: string) => readFileSync(path.join(root, 'builds.log'), 'utf8').split('\n').filter(Boolean).length;
const builtAt = (root: string) => statSync(path.join(root, 'dist', 'server.js')).mtimeMs;
/** A minute after the build, so that no clock resolution hides the change. */
const editLater = (root: string, file: string) => {
  const later = new Date(builtAt(root) + 60_000);
  utimesSync(path.join(root, file), later, later);
};

describe('npm start builds only when the sources changed', () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  it('builds a fresh clone, then starts again without building until a source, tsconfig or package.json changes', {
    timeout: 60_000,
  }, () => {
    const root = fakeProject();
    roots.push(root);

    const first = prestart(root);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr).toContain('dist/server.js does not exist yet');
    expect(builds(root)).toBe(1);

    const built = builtAt(root);
    const second = prestart(root);
    expect(second.status, second.stderr).toBe(0);
    expect(second.stderr).toBe('');
    expect(builds(root)).toBe(1);
    expect(builtAt(root)).toBe(built);

    for (const [file, count] of [
      ['src/modules/routes.ts', 2],
      ['tsconfig.json', 3],
      ['package.json', 4],
    ] as const) {
      editLater(root, file);
      const again = prestart(root);
      expect(again.status, again.stderr).toBe(0);
      expect(again.stderr).toContain(`${file} changed since the last build`);
      expect(builds(root)).toBe(count);
    }
  });

  it('stops npm start when the build fails', () => {
    const root = fakeProject();
    roots.push(root);
    writeFileSync(path.join(root, 'build.mjs'), 'process.exit(2);');
    expect(prestart(root).status).not.toBe(0);
  });
});
