import { SETTING_NAMES, type SettingSchema, settingSchemas } from '../../src/settings.js';

/** README.md's settings table sits between these, so the rest of the section stays hand-written. */
export const README_START = '<!-- settings:start (generated from src/settings.ts by `npm run docs:settings`; edit there) -->';
export const README_END = '<!-- settings:end -->';

const defaultText = (schema: SettingSchema): string | undefined =>
  schema.default === undefined ? undefined : Array.isArray(schema.default) ? schema.default.join(',') : String(schema.default);

/** The description, with a choice's allowed values spelled out: "a, b or c". */
function meaning(schema: SettingSchema): string {
  if (schema.enum === undefined) return schema.description ?? '';
  const values = schema.enum.map((value) => `\`${String(value)}\``);
  return `${schema.description}: ${values.slice(0, -1).join(', ')} or ${values.at(-1)}`;
}

export function settingsTable(): string {
  const rows = SETTING_NAMES.map((name) => {
    const schema = settingSchemas[name];
    const fallback = defaultText(schema);
    return `| \`${name}\` | ${fallback === undefined ? 'unset' : `\`${fallback}\``} | ${meaning(schema).replaceAll('|', '\\|')} |`;
  });
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** `readme` with the table between the markers replaced; an error when the markers are missing. */
export function withSettingsTable(readme: string): string {
  const start = readme.indexOf(README_START);
  const end = readme.indexOf(README_END);
  if (start === -1 || end < start) throw new Error(`README.md needs the lines ${README_START} and ${README_END}`);
  return `${readme.slice(0, start + README_START.length)}\n${settingsTable()}\n${readme.slice(end)}`;
}

/** Markdown emphasis and code marks mean nothing in a shell-style comment. */
const plain = (text: string) => text.replaceAll('`', '').replaceAll('**', '');

/** Every setting, commented out at its default, under a one-line description. */
export function envExample(): string {
  const blocks = SETTING_NAMES.map((name) => {
    const schema = settingSchemas[name];
    return `# ${plain(meaning(schema))}\n# ${name}=${defaultText(schema) ?? ''}`;
  });
  return [
    '# Settings for the Conduit server, read from the environment and from .env in the working directory.',
    '# Generated from src/settings.ts by `npm run docs:settings`; the environment wins over this file.',
    '',
    blocks.join('\n\n'),
    '',
  ].join('\n');
}
