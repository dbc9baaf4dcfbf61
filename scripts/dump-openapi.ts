/**
 * `npm run openapi:dump [file]`: writes the OpenAPI document the server serves at /api/openapi.json to a file
 * (.openapi/openapi.json by default), for the linter and the client generator. The app is built on a throwaway
 * SQLite database, so nothing has to be running and no database of yours is touched.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildApp } from '../src/app.js';
import { createScratchDatabase, testConfig } from '../test/support/app.js';

const file = path.resolve(process.argv[2] ?? '.openapi/openapi.json');
const scratch = await createScratchDatabase('sqlite');
try {
  const app = await buildApp(testConfig(scratch.url));
  try {
    // The document is complete only once every route has been registered.
    await app.ready();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(app.swagger(), null, 2)}\n`);
    console.log(`openapi: wrote ${path.relative(process.cwd(), file)}`);
  } finally {
    await app.close();
  }
} finally {
  await scratch.drop();
}
