import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { envExample, README_END, README_START, settingsTable, withSettingsTable } from '../scripts/settings-docs/render.js';
import { SETTING_NAMES } from '../src/settings.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

describe('the settings documentation', () => {
  it('README.md holds the table the schema gives (npm run docs:settings rewrites it)', () => {
    const readme = read('README.md');
    expect(readme, 'README.md is out of date with src/settings.ts: run npm run docs:settings').toBe(withSettingsTable(readme));
  });

  it('.env.example is the one the schema gives (npm run docs:settings rewrites it)', () => {
    expect(read('.env.example'), '.env.example is out of date with src/settings.ts: run npm run docs:settings').toBe(envExample());
  });

  it('has a table row and a commented-out line for every setting, at its default', () => {
    const table = settingsTable();
    const example = envExample();
    for (const name of SETTING_NAMES) {
      expect(table).toContain(`| \`${name}\` |`);
      expect(example).toMatch(new RegExp(`^# ${name}=`, 'm'));
    }
    expect(table).toContain('| `PORT` | `3000` | TCP port |');
    expect(example).toContain('# CORS_ORIGINS=*\n');
    expect(example).toContain('# LOG_LEVEL=info\n');
    // Nothing is set by copying the file as it is.
    expect(example.split('\n').filter((line) => line !== '' && !line.startsWith('#'))).toEqual([]);
  });

  it('replaces whatever stands between the markers, and only that', () => {
    const stale = `intro\n${README_START}\n| \`PORT\` | \`80\` | old |\n${README_END}\noutro\n`;
    expect(withSettingsTable(stale)).toBe(`intro\n${README_START}\n${settingsTable()}\n${README_END}\noutro\n`);
  });

  it('refuses a README without the markers instead of losing the table', () => {
    expect(() => withSettingsTable('# no markers here\n')).toThrow(/settings:start/);
  });
});
