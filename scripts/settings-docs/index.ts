import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { envExample, withSettingsTable } from './render.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const readme = path.join(root, 'README.md');

writeFileSync(readme, withSettingsTable(readFileSync(readme, 'utf8')));
writeFileSync(path.join(root, '.env.example'), envExample());
console.log('wrote the settings table in README.md and .env.example');
