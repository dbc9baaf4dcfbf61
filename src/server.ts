import { run } from './cli.js';

// `node dist/server.js` (npm start, containers, the conformance runner) is `conduit serve`: same settings, WORKERS too.
await run(['serve', ...process.argv.slice(2)]);
