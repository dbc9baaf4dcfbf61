#!/usr/bin/env node
// Conformance runner: starts the real server (dist/server.js, built by
// `npm run test:conformance`) once per target database and runs the official
// RealWorld suites against it:
//   - the Bruno collection (<REALWORLD_DIR>/bruno, every folder but `environments`)
//   - the legacy Postman collection with newman (<REALWORLD_DIR>/legacy-postman-v1)
//
// Usage: node scripts/conformance.mjs [--db sqlite|postgres|all] [--suite bruno|newman|all]
//                                     [--keep] [--verbose]
//
// Environment:
//   REALWORLD_DIR       folder holding bruno/ and legacy-postman-v1/
//                       (default: ../shared/realworld relative to the project root)
//   TEST_DATABASE_URL   postgres://... ; enables the `postgres` target. A fresh
//                       database conduit_conf_<random> is created from it and
//                       dropped afterwards, so the role needs CREATEDB.
//   CONFORMANCE_START_TIMEOUT_MS  how long to wait for GET /api/tags (default 30000)
//   CONFORMANCE_KEEP=1  keep the temporary folder (reports, logs, SQLite file)
//
// Exit status: 0 when every target passed; 1 when any request/assertion failed,
// the Bruno request total differs from the collection's, a runner broke, or
// the server did not start; 2 on bad usage.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(ROOT, 'package.json'));

const REALWORLD_DIR = path.resolve(ROOT, process.env.REALWORLD_DIR || '../shared/realworld');
const BRUNO_DIR = path.join(REALWORLD_DIR, 'bruno');
const POSTMAN_FILE = path.join(REALWORLD_DIR, 'legacy-postman-v1', 'Conduit.postman_collection.json');
const SERVER_ENTRY = path.join(ROOT, 'dist', 'server.js');

const START_TIMEOUT_MS = Number(process.env.CONFORMANCE_START_TIMEOUT_MS || 30_000);
const STOP_TIMEOUT_MS = 10_000;
const SUITE_TIMEOUT_MS = 10 * 60_000;
const LOG_TAIL_LINES = 200;

// ---------------------------------------------------------------- arguments

function usage(message) {
  if (message) console.error(`conformance: ${message}`);
  console.error('usage: node scripts/conformance.mjs [--db sqlite|postgres|all] [--suite bruno|newman|all] [--keep] [--verbose]');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { db: 'all', suite: 'all', keep: process.env.CONFORMANCE_KEEP === '1', verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? arg.split(/=(.*)/s) : [arg, undefined];
    const value = () => {
      if (inline !== undefined) return inline;
      if (i + 1 >= argv.length) usage(`${flag} needs a value`);
      return argv[++i];
    };
    switch (flag) {
      case '--db':
        opts.db = value();
        break;
      case '--suite':
        opts.suite = value();
        break;
      case '--keep':
        opts.keep = true;
        break;
      case '--verbose':
        opts.verbose = true;
        break;
      case '-h':
      case '--help':
        usage();
        break;
      default:
        usage(`unknown argument ${arg}`);
    }
  }
  if (!['sqlite', 'postgres', 'all'].includes(opts.db)) usage(`--db must be sqlite, postgres or all (got ${opts.db})`);
  if (!['bruno', 'newman', 'all'].includes(opts.suite)) usage(`--suite must be bruno, newman or all (got ${opts.suite})`);
  return opts;
}

// ---------------------------------------------------------------- helpers

function binOf(pkg, name) {
  const pkgJsonPath = require.resolve(`${pkg}/package.json`);
  const { bin } = JSON.parse(readFileSync(pkgJsonPath, 'utf8'));
  const rel = typeof bin === 'string' ? bin : bin?.[name];
  if (!rel) throw new Error(`${pkg} declares no bin ${name}`);
  return path.resolve(path.dirname(pkgJsonPath), rel);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Keeps the last `limit` characters written to it, and mirrors everything into a file. */
class OutputBuffer {
  constructor(file, limit = 512 * 1024) {
    this.limit = limit;
    this.text = '';
    this.file = file ? createWriteStream(file) : null;
  }
  push(chunk) {
    const s = chunk.toString();
    if (this.file && !this.closed) this.file.write(s);
    this.text += s;
    if (this.text.length > this.limit) this.text = this.text.slice(-this.limit);
  }
  tail(lines = LOG_TAIL_LINES) {
    const all = this.text.replace(/\s+$/, '').split('\n');
    return all.slice(-lines).join('\n');
  }
  close() {
    if (this.closed || !this.file) return this.closing ?? Promise.resolve();
    this.closed = true;
    this.closing = new Promise((r) => this.file.end(() => r()));
    return this.closing;
  }
}

/** Runs a command to completion, capturing its output. Never rejects. */
function run(cmd, args, { cwd, env, timeoutMs = SUITE_TIMEOUT_MS, logFile, echo = false }) {
  return new Promise((resolve) => {
    const out = new OutputBuffer(logFile);
    let child;
    try {
      child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      resolve({ code: null, signal: null, error: err, output: out });
      return;
    }
    const onData = (d) => {
      out.push(d);
      if (echo) process.stdout.write(d);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      out.close().then(() => resolve({ code: null, signal: null, error, output: out }));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      out.close().then(() => resolve({ code, signal, timedOut, output: out }));
    });
  });
}

function indent(text, prefix = '    ') {
  return text
    .split('\n')
    .map((l) => prefix + l)
    .join('\n');
}

function oneLine(value, max = 300) {
  const s = (typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value))).replace(/\s+/g, ' ').trim();
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

// ---------------------------------------------------------------- the collection

/** Folders of the Bruno collection to run, and the number of request files in each. */
function brunoFolders() {
  const folders = readdirSync(BRUNO_DIR)
    .filter((name) => name !== 'environments' && !name.startsWith('.'))
    .filter((name) => statSync(path.join(BRUNO_DIR, name)).isDirectory())
    .sort();
  return folders.map((name) => {
    // Every .bru file in a folder is one request, but folder.bru (the folder's own settings).
    const requests = readdirSync(path.join(BRUNO_DIR, name)).filter((f) => f.endsWith('.bru') && f !== 'folder.bru');
    return { name, expected: requests.length };
  });
}

// ---------------------------------------------------------------- databases

async function loadPg() {
  const mod = await import('pg');
  return mod.default ?? mod;
}

async function createPgDatabase(baseUrl) {
  const pg = await loadPg();
  const name = `conduit_conf_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

async function dropPgDatabase(baseUrl, name) {
  const pg = await loadPg();
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    try {
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } catch {
      // PostgreSQL < 13 has no WITH (FORCE).
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
      await client.query(`DROP DATABASE IF EXISTS "${name}"`);
    }
  } finally {
    await client.end();
  }
}

function redactUrl(u) {
  try {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return u;
  }
}

// ---------------------------------------------------------------- the server

// Undo functions for what is running now (server, database), used on Ctrl-C / SIGTERM.
const cleanups = new Set();
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\nconformance: ${sig}, cleaning up`);
    for (const undo of [...cleanups].reverse()) {
      try {
        await undo();
      } catch (err) {
        console.error(`conformance: cleanup failed: ${err.message}`);
      }
    }
    process.exit(130);
  });
}

async function startServer({ port, databaseUrl, logFile }) {
  const env = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    JWT_SECRET: randomBytes(32).toString('hex'), // 64 hex characters
    LOG_LEVEL: 'warn',
    NODE_ENV: process.env.NODE_ENV || 'production',
  };
  const out = new OutputBuffer(logFile);
  const child = spawn(process.execPath, [SERVER_ENTRY], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const server = { child, out, exited: null, port };
  server.undo = () => stopServer(server);
  cleanups.add(server.undo);
  server.exitPromise = new Promise((resolve) => {
    child.on('error', (err) => {
      out.push(`\n[conformance] could not spawn server: ${err.message}\n`);
      server.exited = { code: null, signal: null };
      resolve(server.exited);
    });
    // 'close' comes after 'exit', once the child's stdout/stderr are drained.
    child.on('close', (code, signal) => {
      server.exited = { code, signal };
      resolve(server.exited);
    });
  });
  child.stdout.on('data', (d) => out.push(d));
  child.stderr.on('data', (d) => out.push(d));

  const deadline = Date.now() + START_TIMEOUT_MS;
  const url = `http://127.0.0.1:${port}/api/tags`;
  let lastError = 'no answer yet';
  while (Date.now() < deadline) {
    if (server.exited) {
      return { ok: false, server, reason: `server exited during start-up (code ${server.exited.code}, signal ${server.exited.signal})` };
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return { ok: true, server };
      lastError = `GET /api/tags answered ${res.status}`;
    } catch (err) {
      lastError = err.cause?.code || err.message;
    }
    await sleep(150);
  }
  return { ok: false, server, reason: `GET ${url} did not answer 200 within ${START_TIMEOUT_MS} ms (${lastError})` };
}

async function stopServer(server) {
  if (!server.exited) {
    server.child.kill('SIGTERM');
    const timer = sleep(STOP_TIMEOUT_MS).then(() => 'timeout');
    if ((await Promise.race([server.exitPromise, timer])) === 'timeout') {
      server.out.push(`\n[conformance] server did not stop within ${STOP_TIMEOUT_MS} ms of SIGTERM; sent SIGKILL\n`);
      server.child.kill('SIGKILL');
      await server.exitPromise;
      server.killed = true;
    }
  }
  await server.out.close();
  return server.exited;
}

// ---------------------------------------------------------------- Bruno

function brunoFailureDetails(result) {
  const lines = [];
  if (result.error) lines.push(`error: ${oneLine(result.error)}`);
  for (const a of result.assertionResults || []) {
    if (a.status !== 'pass') {
      lines.push(`${`assert ${a.lhsExpr} ${a.rhsExpr ?? ''}`.trimEnd()}: ${oneLine(a.error ?? a.status)}`);
    }
  }
  for (const [kind, list] of [
    ['pre-request', result.preRequestTestResults],
    ['post-response', result.postResponseTestResults],
    ['test', result.testResults],
  ]) {
    for (const t of list || []) {
      if (t.status !== 'pass') lines.push(`${kind} ${oneLine(t.description ?? '')}: ${oneLine(t.error ?? t.status)}`);
    }
  }
  return lines;
}

function requestFailed(result) {
  if (result.status === 'error' || result.error) return true;
  const lists = [result.assertionResults, result.testResults, result.preRequestTestResults, result.postResponseTestResults];
  return lists.some(
    (list) => (list || []).some((x) => x.status !== 'pass' && x.status !== 'skipped') || (list || []).some((x) => x.isScriptError),
  );
}

async function runBruno({ port, workDir, folders, verbose }) {
  const bru = binOf('@usebruno/cli', 'bru');
  const host = `http://127.0.0.1:${port}`;
  const totals = { expected: 0, total: 0, passed: 0, failed: 0, skipped: 0, assertions: 0, assertionsFailed: 0 };
  const failures = [];
  const problems = [];
  const env = { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' };

  for (const folder of folders) {
    totals.expected += folder.expected;
    const report = path.join(workDir, `bruno-${folder.name}.json`);
    const args = [bru, 'run', folder.name, '--env', 'local', '--env-var', `host=${host}`, '--sandbox', 'safe', '--reporter-json', report];
    const res = await run(process.execPath, args, {
      cwd: BRUNO_DIR,
      env,
      logFile: path.join(workDir, `bruno-${folder.name}.log`),
      echo: verbose,
    });

    let iterations = null;
    if (existsSync(report)) {
      try {
        iterations = JSON.parse(await readFile(report, 'utf8'));
      } catch (err) {
        problems.push(`bruno ${folder.name}: unreadable JSON report (${err.message})`);
      }
    }
    // Exit status 0 = all passed, 1 = some request/test/assertion failed; anything else is a runner error.
    const runnerBroke = res.error || res.timedOut || ![0, 1].includes(res.code) || !Array.isArray(iterations);
    if (runnerBroke) {
      const why = res.error
        ? res.error.message
        : res.timedOut
          ? 'timed out'
          : `exit code ${res.code}${res.signal ? `, signal ${res.signal}` : ''}`;
      problems.push(`bruno ${folder.name}: runner failed (${why}); output:\n${indent(res.output.tail(60))}`);
      totals.failed += folder.expected;
      console.log(`  bruno ${folder.name.padEnd(22)} RUNNER FAILED (${why})`);
      continue;
    }

    let total = 0,
      passed = 0,
      failed = 0,
      skipped = 0;
    for (const it of iterations) {
      for (const r of it.results || []) {
        total++;
        totals.assertions += (r.assertionResults || []).length;
        totals.assertionsFailed += (r.assertionResults || []).filter((a) => a.status !== 'pass').length;
        if (r.status === 'skipped' || r.skipped) {
          skipped++;
        } else if (requestFailed(r)) {
          failed++;
          failures.push({
            name: `${r.path ?? r.test?.filename ?? r.name}`,
            request: `${r.request?.method ?? '?'} ${r.request?.url ?? '?'}`,
            status: r.response?.status,
            body: r.response?.data,
            details: brunoFailureDetails(r),
          });
        } else {
          passed++;
        }
      }
      // Cross-check with Bruno's own summary of the iteration.
      const s = it.summary;
      if (s && s.passedRequests !== undefined && s.passedRequests !== passed) {
        problems.push(`bruno ${folder.name}: Bruno's summary says ${s.passedRequests} passed, the results list ${passed}`);
      }
    }
    if (res.code === 1 && failed === 0) problems.push(`bruno ${folder.name}: bru exited 1 but no failed request was found in its report`);
    if (res.code === 0 && failed > 0) problems.push(`bruno ${folder.name}: bru exited 0 with ${failed} failed request(s)`);
    if (total !== folder.expected) {
      problems.push(`bruno ${folder.name}: ran ${total} requests, the folder has ${folder.expected}`);
    }
    totals.total += total;
    totals.passed += passed;
    totals.failed += failed;
    totals.skipped += skipped;
    console.log(
      `  bruno ${folder.name.padEnd(22)} ${passed}/${folder.expected} requests passed${failed ? `, ${failed} failed` : ''}${skipped ? `, ${skipped} skipped` : ''}`,
    );
  }
  if (totals.total !== totals.expected) {
    problems.push(`bruno: ran ${totals.total} requests in all, the collection has ${totals.expected}`);
  }
  const ok = problems.length === 0 && totals.failed === 0 && totals.skipped === 0 && totals.passed === totals.expected;
  return { ok, totals, failures, problems };
}

// ---------------------------------------------------------------- newman

function postmanUrl(url) {
  if (!url) return '?';
  if (typeof url === 'string') return url;
  const host = Array.isArray(url.host) ? url.host.join('.') : (url.host ?? '');
  const pathPart = Array.isArray(url.path) ? `/${url.path.join('/')}` : (url.path ?? '');
  const query = (url.query || [])
    .filter((q) => !q.disabled)
    .map((q) => `${q.key}=${q.value ?? ''}`)
    .join('&');
  return `${url.protocol ? `${url.protocol}://` : ''}${host}${url.port ? `:${url.port}` : ''}${pathPart}${query ? `?${query}` : ''}`;
}

function postmanBody(response) {
  const stream = response.stream;
  if (stream?.type === 'Buffer' && Array.isArray(stream.data)) return Buffer.from(stream.data).toString('utf8');
  return undefined;
}

async function runNewman({ port, workDir, verbose }) {
  const newman = binOf('newman', 'newman');
  const unique = `conf${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const report = path.join(workDir, 'newman.json');
  const args = [
    newman,
    'run',
    POSTMAN_FILE,
    '--delay-request',
    '1',
    '--global-var',
    `APIURL=http://127.0.0.1:${port}/api`,
    '--global-var',
    `USERNAME=${unique}`,
    '--global-var',
    `EMAIL=${unique}@mail.com`,
    '--global-var',
    'PASSWORD=password',
    '--reporters',
    'cli,json',
    '--reporter-json-export',
    report,
    '--color',
    'off',
    '--disable-unicode',
  ];
  const res = await run(process.execPath, args, {
    cwd: REALWORLD_DIR,
    env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
    logFile: path.join(workDir, 'newman.log'),
    echo: verbose,
  });
  const problems = [];
  let summary = null;
  if (existsSync(report)) {
    try {
      summary = JSON.parse(await readFile(report, 'utf8'));
    } catch (err) {
      problems.push(`newman: unreadable JSON report (${err.message})`);
    }
  }
  if (res.error || res.timedOut || ![0, 1].includes(res.code) || !summary?.run?.stats) {
    const why = res.error ? res.error.message : res.timedOut ? 'timed out' : `exit code ${res.code}`;
    problems.push(`newman: runner failed (${why}); output:\n${indent(res.output.tail(60))}`);
    console.log(`  newman                       RUNNER FAILED (${why})`);
    return { ok: false, totals: { total: 0, passed: 0, failed: 0, requests: 0, requestsFailed: 0 }, failures: [], problems };
  }

  const { stats, failures: rawFailures = [], executions = [] } = summary.run;
  const total = stats.assertions?.total ?? 0;
  const failed = stats.assertions?.failed ?? 0;
  const totals = {
    total,
    failed,
    passed: total - failed,
    requests: stats.requests?.total ?? 0,
    requestsFailed: stats.requests?.failed ?? 0,
    scriptsFailed: (stats.testScripts?.failed ?? 0) + (stats.prerequestScripts?.failed ?? 0),
  };
  // One entry per failing request execution, holding each failed assertion's message.
  const byExecution = new Map();
  for (const f of rawFailures) {
    const key = f.cursor?.ref ?? `${f.source?.id}:${byExecution.size}`;
    if (!byExecution.has(key)) {
      const exec = executions.find((e) => f.cursor?.ref && e.cursor?.ref === f.cursor.ref);
      byExecution.set(key, {
        name: `${f.parent?.name ? `${f.parent.name} / ` : ''}${f.source?.name ?? '?'}`,
        request: exec ? `${exec.request?.method ?? '?'} ${postmanUrl(exec.request?.url)}` : undefined,
        status: exec?.response?.code,
        body: exec?.response ? postmanBody(exec.response) : undefined,
        details: [],
      });
    }
    const e = f.error ?? {};
    byExecution.get(key).details.push(`${e.test ? `"${e.test}"` : `${e.name ?? 'Error'} (${f.at ?? '?'})`}: ${oneLine(e.message ?? '')}`);
  }
  const failures = [...byExecution.values()];
  if (res.code === 1 && rawFailures.length === 0) problems.push('newman exited 1 but its report lists no failure');
  if (totals.requests === 0) problems.push('newman ran no request');
  if (total === 0) problems.push('newman ran no assertion');
  const ok = problems.length === 0 && failed === 0 && totals.requestsFailed === 0 && totals.scriptsFailed === 0 && res.code === 0;
  console.log(
    `  newman                       ${totals.passed}/${total} assertions passed${failed ? `, ${failed} failed` : ''} (${totals.requests} requests${totals.requestsFailed ? `, ${totals.requestsFailed} failed` : ''})`,
  );
  return { ok, totals, failures, problems };
}

// ---------------------------------------------------------------- one target

async function runTarget(target, opts, folders) {
  const workDir = await mkdtemp(path.join(os.tmpdir(), `conduit-conf-${target}-`));
  const result = { target, ok: false, started: false, bruno: null, newman: null, problems: [], workDir };
  let pgDb = null;
  let server = null;
  let dropDb = null;
  console.log(`\n=== ${target} ===`);
  try {
    let databaseUrl;
    if (target === 'sqlite') {
      databaseUrl = `sqlite:${path.join(workDir, 'conduit.db')}`;
    } else {
      pgDb = await createPgDatabase(process.env.TEST_DATABASE_URL);
      const created = pgDb;
      dropDb = () => dropPgDatabase(process.env.TEST_DATABASE_URL, created.name);
      cleanups.add(dropDb);
      databaseUrl = pgDb.url;
    }
    const port = await freePort();
    console.log(`  database ${redactUrl(databaseUrl)}, server on 127.0.0.1:${port}`);
    const start = await startServer({ port, databaseUrl, logFile: path.join(workDir, 'server.log') });
    server = start.server;
    if (!start.ok) {
      result.problems.push(`server failed to start: ${start.reason}`);
      return result;
    }
    result.started = true;

    if (opts.suite !== 'newman') {
      result.bruno = await runBruno({ port, workDir, folders, verbose: opts.verbose });
      result.problems.push(...result.bruno.problems);
    }
    if (opts.suite !== 'bruno') {
      if (server.exited) {
        result.problems.push(
          `server exited during the Bruno run (code ${server.exited.code}, signal ${server.exited.signal}); newman not run`,
        );
      } else {
        result.newman = await runNewman({ port, workDir, verbose: opts.verbose });
        result.problems.push(...result.newman.problems);
      }
    }
    if (server.exited) {
      result.problems.push(`server exited while the suites ran (code ${server.exited.code}, signal ${server.exited.signal})`);
    }
  } catch (err) {
    result.problems.push(`${target}: ${err.stack || err.message}`);
  } finally {
    cleanups.delete(dropDb);
    if (server) {
      cleanups.delete(server.undo);
      const exit = await stopServer(server);
      if (server.killed) result.problems.push('server did not stop on SIGTERM and was killed');
      result.serverExit = exit;
      if (result.started && exit && exit.code !== 0 && exit.signal !== 'SIGTERM') {
        // Reported, not counted as a failure: the suites' results stand.
        console.log(`  note: the server exited with code ${exit.code}${exit.signal ? ` (signal ${exit.signal})` : ''} after SIGTERM`);
      }
      result.serverOut = server.out.tail();
    }
    if (pgDb) {
      try {
        await dropPgDatabase(process.env.TEST_DATABASE_URL, pgDb.name);
      } catch (err) {
        result.problems.push(`could not drop database ${pgDb.name}: ${err.message}`);
      }
    }
  }
  result.ok =
    result.started && result.problems.length === 0 && (result.bruno ? result.bruno.ok : true) && (result.newman ? result.newman.ok : true);
  return result;
}

function summaryLine(r) {
  const parts = [];
  if (!r.started) parts.push('server failed to start');
  if (r.bruno) {
    const t = r.bruno.totals;
    parts.push(
      `bruno ${t.passed}/${t.expected} requests passed${t.failed ? ` (${t.failed} failed)` : ''}${t.total !== t.expected ? ` [ran ${t.total}]` : ''}`,
    );
  }
  if (r.newman) {
    const t = r.newman.totals;
    parts.push(`newman ${t.passed}/${t.total} assertions passed${t.failed ? ` (${t.failed} failed)` : ''}`);
  }
  return `${r.target}: ${parts.join(', ')}${r.ok ? '' : ' -- FAILED'}`;
}

function report(r) {
  const failures = [
    ...(r.bruno?.failures ?? []).map((f) => ({ suite: 'bruno', ...f })),
    ...(r.newman?.failures ?? []).map((f) => ({ suite: 'newman', ...f })),
  ];
  if (failures.length) {
    console.log(`\n--- ${r.target}: failing requests ---`);
    for (const f of failures) {
      console.log(`[${f.suite}] ${f.name}${f.request ? `  (${f.request})` : ''}${f.status !== undefined ? ` -> ${f.status}` : ''}`);
      for (const d of f.details) console.log(`    ${d}`);
      if (f.body !== undefined && f.body !== null && f.body !== '') console.log(`    response body: ${oneLine(f.body, 400)}`);
    }
  }
  if (r.problems.length) {
    console.log(`\n--- ${r.target}: problems ---`);
    for (const p of r.problems) console.log(`  - ${p}`);
  }
  if (!r.ok && r.serverOut !== undefined) {
    console.log(`\n--- ${r.target}: server output (last ${LOG_TAIL_LINES} lines; full log ${path.join(r.workDir, 'server.log')}) ---`);
    console.log(r.serverOut || '(no output)');
  }
}

// ---------------------------------------------------------------- main

async function main() {
  const opts = parseArgs(process.argv.slice(2));

  const missing = [];
  if (!existsSync(SERVER_ENTRY)) missing.push(`${SERVER_ENTRY} (run \`npm run build\`, or use \`npm run test:conformance\`)`);
  if (opts.suite !== 'newman' && !existsSync(BRUNO_DIR)) missing.push(BRUNO_DIR);
  if (opts.suite !== 'bruno' && !existsSync(POSTMAN_FILE)) missing.push(POSTMAN_FILE);
  if (missing.length) {
    console.error(`conformance: missing ${missing.join(', ')} (REALWORLD_DIR=${REALWORLD_DIR})`);
    process.exit(1);
  }

  const hasPg = Boolean(process.env.TEST_DATABASE_URL);
  let targets;
  if (opts.db === 'all') targets = hasPg ? ['sqlite', 'postgres'] : ['sqlite'];
  else targets = [opts.db];
  if (targets.includes('postgres') && !hasPg) {
    console.error('conformance: --db postgres needs TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)');
    process.exit(2);
  }
  if (opts.db === 'all' && !hasPg) console.log('conformance: TEST_DATABASE_URL is not set, skipping the postgres target');

  const folders = opts.suite === 'newman' ? [] : brunoFolders();
  const expected = folders.reduce((n, f) => n + f.expected, 0);
  if (opts.suite !== 'newman') {
    console.log(`conformance: Bruno collection ${BRUNO_DIR}: ${folders.length} folders, ${expected} requests`);
    if (expected === 0) {
      console.error('conformance: found no Bruno request files');
      process.exit(1);
    }
  }

  const results = [];
  for (const target of targets) {
    const r = await runTarget(target, opts, folders);
    results.push(r);
  }

  console.log('\n=== conformance summary ===');
  for (const r of results) report(r);
  console.log('');
  for (const r of results) console.log(summaryLine(r));

  const allOk = results.every((r) => r.ok);
  for (const r of results) {
    if (opts.keep || !r.ok) console.log(`${r.target}: reports and logs kept in ${r.workDir}`);
    else await rm(r.workDir, { recursive: true, force: true });
  }
  process.exit(allOk ? 0 : 1);
}

main().catch((err) => {
  console.error(err.stack || err);
  process.exit(1);
});
