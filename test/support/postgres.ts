import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './processes.js';

const run = promisify(execFile);
const POSTGRES_LIB = '/usr/lib/postgresql';

/** The newest Debian-packaged PostgreSQL's bin folder, or null when no initdb is installed. */
function findPostgresBin(): string | null {
  const versions = existsSync(POSTGRES_LIB) ? readdirSync(POSTGRES_LIB) : [];
  const bins = versions
    .sort((a, b) => Number(a) - Number(b))
    .map((version) => path.join(POSTGRES_LIB, version, 'bin'))
    .filter((bin) => existsSync(path.join(bin, 'initdb')));
  return bins.at(-1) ?? null;
}

export const POSTGRES_BIN = findPostgresBin();

/** PostgreSQL refuses to run as root: as root, its tools run as the `postgres` OS user. */
const asPostgres = (tool: string, args: string[]) => {
  const command = path.join(POSTGRES_BIN ?? '', tool);
  return process.getuid?.() === 0 ? run('runuser', ['-u', 'postgres', '--', command, ...args]) : run(command, args);
};

/** A PostgreSQL server of the test's own, in a temp folder on a free loopback port, that it may stop and start. */
export interface ThrowawayPostgres {
  url: string;
  start(): Promise<void>;
  /** `fast` disconnects clients with an error first, as a planned restart does; `immediate` just vanishes, as a crash. */
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  destroy(): Promise<void>;
}

/** A cluster's folder on a free port: the server's files in `data`, its log and socket beside them. */
async function clusterFolder(prefix: string) {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  if (process.getuid?.() === 0) await run('chown', ['postgres:', dir]);
  return { dir, data: path.join(dir, 'data'), port: await freePort() };
}

function throwawayCluster({ dir, data, port }: Awaited<ReturnType<typeof clusterFolder>>): ThrowawayPostgres {
  // Durability of this cluster's own files does not matter to the tests; skipping fsync keeps restarts quick.
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${dir} -c fsync=off`;
  const cluster: ThrowawayPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async start() {
      await asPostgres('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-o', options, '-w', '-t', '60', 'start']);
    },
    async stop(mode) {
      await asPostgres('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
    },
    async destroy() {
      if (existsSync(path.join(data, 'postmaster.pid'))) await cluster.stop('immediate').catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

async function started(cluster: ThrowawayPostgres, create: () => Promise<unknown>): Promise<ThrowawayPostgres> {
  try {
    await create();
    await cluster.start();
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
  return cluster;
}

const requirePostgresBin = () => {
  if (POSTGRES_BIN === null) throw new Error(`no initdb under ${POSTGRES_LIB}/*/bin (apt-get install -y postgresql)`);
};

export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  requirePostgresBin();
  const folder = await clusterFolder('conduit-pg-');
  return started(throwawayCluster(folder), () =>
    asPostgres('initdb', ['-D', folder.data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']),
  );
}

/**
 * A streaming replica of `primary` (a throwaway cluster, whose trust rules admit replication from loopback): a base
 * backup with `-R`, so it follows the primary from the start, applying each commit `applyDelayMs` after it happened.
 */
export async function startStreamingReplica(primary: ThrowawayPostgres, applyDelayMs: number): Promise<ThrowawayPostgres> {
  requirePostgresBin();
  const folder = await clusterFolder('conduit-replica-');
  const { port } = new URL(primary.url);
  return started(throwawayCluster(folder), async () => {
    await asPostgres('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      port,
      '-U',
      'postgres',
      '-D',
      folder.data,
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
    appendFileSync(path.join(folder.data, 'postgresql.auto.conf'), `recovery_min_apply_delay = '${applyDelayMs}ms'\n`);
  });
}
