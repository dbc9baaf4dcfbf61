/**
 * `npm run abuse`: what one client with one free account can do to everyone else, measured against the built server
 * (dist/server.js) with its default limits, on SQLite and, when TEST_DATABASE_URL is set, on PostgreSQL. The clients
 * tell the server their addresses through X-Forwarded-For (TRUST_PROXY=1), so the attacker and the bystander are two
 * clients, as they would be behind a load balancer. Exits 1 when an attack gets past its bound:
 *   1. validation cost: 1 MiB bodies of 340,000 blank tags, two at a time, to POST and to PUT on someone else's
 *      article; a bystander's list page must keep its p50 within 3 x (+ 5 ms) of the quiet one;
 *   2. memory: 2,000 spellings of one author's list URL (`limit=100`); the server's RSS may grow by 64 MiB at most;
 *   3. login race: 40 wrong passwords for one account at once from 40 addresses; no more than AUTH_RATE_LIMIT_MAX
 *      (10) may be checked;
 *   4. lockout: the account the race locked must still let its owner in from a device that signed in before (its
 *      Known-Device header), and no one else, the owner on a new device included.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { createScratchDatabase, DATABASES } from '../test/support/app.js';
import { childEnv, request, SERVER_ENTRY, startServer } from '../test/support/processes.js';

const LOGIN_LIMIT = 10;
const QUIET_MS = 3000;
const ATTACK_MS = 5000;
const VARIANTS = 2000;
const RSS_GROWTH_LIMIT_MIB = 64;

type Check = { name: string; figure: string; passed: boolean };

const percentile = (values: number[], share: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * share))] ?? Number.NaN;
};

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/**
 * One attacker, in a thread of its own so that building and sending its bodies does not slow the bystander's client:
 * 1 MiB bodies of 340,000 blank tags, one after another until told to stop; it answers with the statuses it got.
 */
const ATTACKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { base, token, address, method, url } = workerData;
const body = JSON.stringify({ article: { title: 't', description: 'd', body: 'b', tagList: new Array(340000).fill('') } });
const headers = { authorization: 'Token ' + token, 'content-type': 'application/json', 'x-forwarded-for': address };
const statuses = new Map();
let attacking = true;
parentPort.on('message', () => (attacking = false));
(async () => {
  while (attacking) {
    // 0: the server closed the connection before taking the whole body, as it does when it refuses one.
    const status = await fetch(base + url, { method, headers, body }).then(
      async (response) => (await response.arrayBuffer(), response.status),
      () => 0,
    );
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
  }
  parentPort.postMessage([...statuses]);
})();
`;

async function stopAttacker(worker: Worker): Promise<Array<[number, number]>> {
  const counts = once(worker, 'message');
  worker.postMessage('stop');
  const [statuses] = await counts;
  await worker.terminate();
  return statuses;
}

/** A client at one address, which every request names in X-Forwarded-For; answers the status. */
const clientAt =
  (base: string, address: string) =>
  async (method: string, url: string, body?: unknown): Promise<number> =>
    (await request(base, method, url, { body, headers: { 'x-forwarded-for': address } })).status;

/**
 * One bystander reading a list page every 20 ms for `ms`: the p50 of its answered reads and how many were refused.
 * A reader, not a loop, so it stays within the per-address limit (600 a minute) over the quiet and attacked runs.
 */
async function bystanderReads(base: string, ms: number): Promise<{ p50: number; refused: number }> {
  const bystander = clientAt(base, '198.51.100.1');
  const latencies: number[] = [];
  let refused = 0;
  for (const end = Date.now() + ms; Date.now() < end; ) {
    const started = performance.now();
    if ((await bystander('GET', '/api/articles?limit=20')) === 200) latencies.push(performance.now() - started);
    else refused += 1;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { p50: percentile(latencies, 0.5), refused };
}

async function attackOneDatabase(databaseUrl: string): Promise<Check[]> {
  const server = await startServer(SERVER_ENTRY, [], childEnv(databaseUrl, { NODE_ENV: 'production', TRUST_PROXY: '1' }));
  try {
    const { base } = server;
    const register = async (name: string) => {
      const user = { username: `${name}${Date.now()}`, email: `${name}${Date.now()}@example.com`, password: 'password123' };
      const answer = await request(base, 'POST', '/api/users', { body: { user } });
      return { ...user, token: answer.body.user.token as string };
    };
    const owner = await register('owner');
    const attacker = await register('attacker');
    let slug = '';
    for (let i = 0; i < 40; i++) {
      const article = { title: `Article ${i}`, description: 'd', body: 'b'.repeat(2000), tagList: ['abuse', `t${i % 5}`] };
      slug = (await request(base, 'POST', '/api/articles', { token: owner.token, body: { article } })).body.article.slug;
    }
    const checks: Check[] = [];

    // 1. Validation cost.
    const quiet = await bystanderReads(base, QUIET_MS);
    const attackers = [
      { address: '203.0.113.1', method: 'POST', url: '/api/articles' },
      { address: '203.0.113.2', method: 'PUT', url: `/api/articles/${slug}` },
    ].map((target) => new Worker(ATTACKER, { eval: true, workerData: { base, token: attacker.token, ...target } }));
    const underAttack = await bystanderReads(base, ATTACK_MS);
    const statuses = new Map<number, number>();
    for (const counts of await Promise.all(attackers.map(stopAttacker))) {
      for (const [status, count] of counts) statuses.set(status, (statuses.get(status) ?? 0) + count);
    }
    const answers = [...statuses].map(([status, count]) => `${count} × ${status}`).join(', ');
    checks.push({
      name: 'validation cost: 1 MiB tag bombs, two at a time',
      figure:
        `bystander list p50 ${quiet.p50.toFixed(1)} ms quiet, ${underAttack.p50.toFixed(1)} ms under attack ` +
        `(${quiet.refused} and ${underAttack.refused} reads refused); attacker got ${answers}`,
      passed: quiet.refused + underAttack.refused === 0 && underAttack.p50 <= quiet.p50 * 3 + 5,
    });

    // 2. Memory amplification.
    const before = rssMiB(server.child.pid!);
    const reader = clientAt(base, '203.0.113.3');
    const spellings = Array.from({ length: VARIANTS }, (_, i) =>
      Array.from(owner.username, (character, at) => ((i >> at) & 1 ? character.toUpperCase() : character.toLowerCase())).join(''),
    );
    for (let start = 0; start < VARIANTS; start += 8) {
      await Promise.all(
        spellings
          .slice(start, start + 8)
          .map((name, i) => reader('GET', `/api/articles?author=${name}&limit=100&offset=${(start + i) % 10}`)),
      );
    }
    const grown = rssMiB(server.child.pid!) - before;
    checks.push({
      name: `memory: ${VARIANTS} spellings of one author's list URL`,
      figure: `server RSS ${before.toFixed(0)} → ${(before + grown).toFixed(0)} MiB (+${grown.toFixed(0)})`,
      passed: grown <= RSS_GROWTH_LIMIT_MIB,
    });

    const ownerSignsIn = (headers: Record<string, string> = {}) =>
      request(base, 'POST', '/api/users/login', {
        body: { user: { email: owner.email, password: owner.password } },
        headers: { 'x-forwarded-for': '198.51.100.7', ...headers },
      });
    const knownDevice = (await ownerSignsIn()).headers.get('known-device') ?? '';

    // 3. Login race.
    const guesses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        clientAt(base, `192.0.2.${i + 1}`)('POST', '/api/users/login', { user: { email: owner.email, password: `guess-${i}` } }),
      ),
    );
    const checked = guesses.filter((status) => status === 401).length;
    const refused = guesses.filter((status) => status === 429).length;
    checks.push({
      name: 'login race: 40 wrong passwords at once',
      figure: `${checked} checked (401), ${refused} refused (429)`,
      passed: checked <= LOGIN_LIMIT && checked + refused === guesses.length,
    });

    // 4. Lockout.
    const fromKnownDevice = (await ownerSignsIn({ 'known-device': knownDevice })).status;
    const fromNewDevice = (await ownerSignsIn()).status;
    checks.push({
      name: 'lockout: the owner right after the race',
      figure: `from a known device ${fromKnownDevice}, from a new one ${fromNewDevice}`,
      passed: fromKnownDevice === 200 && fromNewDevice === 429,
    });
    return checks;
  } finally {
    await server.stop();
  }
}

let failed = false;
for (const kind of DATABASES) {
  const scratch = await createScratchDatabase(kind);
  try {
    for (const check of await attackOneDatabase(scratch.url)) {
      console.log(`abuse [${kind}] ${check.passed ? 'ok  ' : 'FAIL'} ${check.name}: ${check.figure}`);
      failed ||= !check.passed;
    }
  } finally {
    await scratch.drop();
  }
}
process.exitCode = failed ? 1 : 0;
