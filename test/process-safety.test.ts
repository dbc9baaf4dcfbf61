import { afterEach, describe, expect, it } from 'vitest';
import { listeningText } from '../src/cli/serve.js';
import { createScratchDatabase, type ScratchDatabase } from './support/app.js';
import { childEnv, SERVER_ENTRY, startServer, type RunningServer } from './support/processes.js';

const logLines = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));

describe('the listening line', () => {
  it('names the URL, the API and the docs', () => {
    expect(listeningText('http://127.0.0.1:3000')).toBe(
      'Conduit listening on http://127.0.0.1:3000 — API http://127.0.0.1:3000/api, docs http://127.0.0.1:3000/docs',
    );
    expect(listeningText('http://[::1]:8080')).toBe('Conduit listening on http://[::1]:8080 — API http://[::1]:8080/api, docs http://[::1]:8080/docs');
  });

  it('adds an address a browser can reach when listening on every IPv6 address', () => {
    expect(listeningText('http://[::]:3000')).toBe(
      'Conduit listening on http://[::]:3000 (http://localhost:3000) — API http://localhost:3000/api, docs http://localhost:3000/docs',
    );
  });
});

describe('node dist/server.js', () => {
  let scratch: ScratchDatabase | undefined;
  let server: RunningServer | undefined;

  afterEach(async () => {
    await server?.stop('SIGKILL');
    await scratch?.drop();
  });

  it('logs the listening line once, at info', async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { LOG_LEVEL: 'info' }));
    const { base } = server;
    const listening = logLines(server.output()).filter((line) => String(line.msg).startsWith('Conduit listening'));
    expect(listening).toEqual([expect.objectContaining({ level: 30, msg: `Conduit listening on ${base} — API ${base}/api, docs ${base}/docs` })]);
  });

  it('names a loopback URL among the addresses when listening on 0.0.0.0', async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url, { LOG_LEVEL: 'info', HOST: '0.0.0.0' }));
    const { base } = server;
    const listening = logLines(server.output())
      .map((line) => String(line.msg))
      .filter((msg) => msg.startsWith('Conduit listening'));
    expect(listening).toContain(`Conduit listening on ${base} — API ${base}/api, docs ${base}/docs`);
    expect(listening.filter((msg) => msg.includes('0.0.0.0'))).toEqual([]);
  });
});
