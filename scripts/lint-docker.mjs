// hadolint is a native binary that neither Debian 12 nor npm provides, so the Dockerfile is checked with the
// validator behind VS Code's Docker support; its warnings fail the run too, as hadolint's would.
import { readFileSync } from 'node:fs';
import { validate } from 'dockerfile-utils';

const file = process.argv[2] ?? 'Dockerfile';
const findings = validate(readFileSync(file, 'utf8'));
for (const { range, message } of findings) {
  console.error(`${file}:${range.start.line + 1}:${range.start.character + 1}: ${message}`);
}
if (findings.length > 0) process.exitCode = 1;
