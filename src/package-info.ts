import { readFileSync } from 'node:fs';

/** Read once at start; one level up from both src/ and dist/. */
export const packageInfo = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
  license: string;
};
