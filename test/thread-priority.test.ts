import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELPER_THREAD_NICE } from '../src/cli/thread-priority.js';
import { createScratchDatabase, type ScratchDatabase } from './support/app.js';
import { unique } from './support/client.js';
import { childEnv, request, SERVER_ENTRY, startServer, type RunningServer } from './support/processes.js';

/** Field 19 of /proc/<pid>/task/<tid>/stat; the fields after the parenthesised name start at field 3. */
const NICE_FIELD_AFTER_NAME = 19 - 3;

function niceByThread(pid: number): Map<number, number> {
  const nice = new Map<number, number>();
  for (const entry of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${entry}/stat`, 'utf8');
    nice.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[NICE_FIELD_AFTER_NAME]));
  }
  return nice;
}

describe.runIf(process.platform === 'linux')('thread priorities of a started server', () => {
  let scratch: ScratchDatabase;
  let server: RunningServer;

  beforeAll(async () => {
    scratch = await createScratchDatabase('sqlite');
    server = await startServer(SERVER_ENTRY, [], childEnv(scratch.url));
  });

  afterAll(async () => {
    await server?.stop();
    await scratch?.drop();
  });

  it('keeps the event loop at its priority and lowers every other thread to the lowest', () => {
    const pid = server.child.pid!;
    const nice = niceByThread(pid);
    const ownNice = niceByThread(process.pid).get(process.pid);
    expect(nice.get(pid)).toBe(ownNice);
    const helpers = [...nice].filter(([threadId]) => threadId !== pid);
    // libuv's pool alone has four threads by default, and V8 runs its own beside them.
    expect(helpers.length).toBeGreaterThanOrEqual(5);
    expect(helpers.filter(([, value]) => value !== HELPER_THREAD_NICE)).toEqual([]);
  });

  it('still hashes passwords on the lowered pool', async () => {
    const username = unique('nice');
    const user = { username, email: `${username}@example.com`, password: 'password123' };
    expect((await request(server.base, 'POST', '/api/users', { body: { user } })).status).toBe(201);
    const login = await request(server.base, 'POST', '/api/users/login', { body: { user: { email: user.email, password: user.password } } });
    expect(login.status).toBe(200);
    expect(login.body.user.username).toBe(username);
  });
});
