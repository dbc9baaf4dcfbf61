// Forked by rate-limit.test.ts, whose end of the IPC channel never answers: a worker whose cluster primary is stuck.
// It builds the app as a cluster worker does, sends two reads, opens two event streams, and reports how they went.
import { buildApp } from '../../dist/app.js';
import { loadConfig } from '../../dist/config.js';

// Without its test, nobody would ever stop it.
process.on('disconnect', () => process.exit(1));
const lines = [];
const app = await buildApp(loadConfig(process.env), { countInPrimary: true, logStream: { write: (line) => lines.push(line) } });
const startedAt = Date.now();
const statuses = [];
for (let i = 0; i < 2; i++) statuses.push((await app.inject({ url: '/api/tags' })).statusCode);
const tookMs = Date.now() - startedAt;
const streams = [];
for (let i = 0; i < 2; i++) {
  const response = await app.inject({ url: '/api/events', payloadAsStream: true });
  streams.push(response.statusCode);
  response.stream().destroy();
}
await app.close();
const warnings = lines.filter((line) => line.includes('the cluster primary does not answer')).length;
process.send({ report: { statuses, streams, tookMs, warnings } }, () => process.disconnect());
