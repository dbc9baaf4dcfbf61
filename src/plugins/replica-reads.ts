import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import type { DatabaseHandle, Executor } from '../db/index.js';
import { parseWalPosition, type ReplicaSet } from '../db/replicas.js';
import { READ_METHODS } from '../read-methods.js';

declare module 'fastify' {
  interface FastifyInstance {
    readRouting: ReadRouting;
  }
  interface FastifyRequest {
    /** The replica this read request's statements go to; null sends them to the primary's read pool. */
    reader: Executor | null;
  }
}

/** Where a read request's statements go, once its reader is known (users/auth.ts). */
export interface ReadRouting {
  /** A signed-in reader goes to a replica that has replayed this account's last write, or to the primary. */
  forAccount(request: FastifyRequest, accountId: number): Promise<void>;
  /** Sends the rest of the request to the primary; false when it was there already. */
  toPrimary(request: FastifyRequest): boolean;
}

const WITHOUT_REPLICAS: ReadRouting = {
  forAccount: async () => {},
  toPrimary: () => false,
};

/** Keeps the higher of the stored and the given position (two writes may record out of order), and renews its expiry. */
const RAISE_POSITION = `
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > stored then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end`;

/**
 * How long an account's last write position is kept: past it, every replica allowed to take reads has replayed it
 * (one within the lag allowed has replayed what the primary had a poll before that), so any may answer the account.
 * The minute is a margin for polls that stall; the cost is one small key per account that wrote in that time.
 */
const positionTtlMs = (maxLagMs: number) => maxLagMs + 60_000;

/**
 * Reads go to replicas (db/replicas.ts), and each client reads its own writes. After a signed-in account's write, the
 * primary's WAL insert position is kept in Redis under the account; a later read by it, on any instance or worker, goes
 * to a replica that has replayed that far, or to the primary. Anonymous readers have no writes of their own to see:
 * any replica within the lag allowed. Without Redis no instance can know another's writes, so signed-in reads stay on
 * the primary. The position travels with the account, not with the client: a header would need every frontend to
 * send it back, and the official ones do not.
 */
export function installReplicaReads(
  app: FastifyInstance,
  database: DatabaseHandle,
  redis: Redis | null,
  keyPrefix: string,
  maxLagMs: number,
): void {
  app.decorateRequest('reader', null);
  const replicas = database.replicas;
  if (replicas === null) {
    app.decorate('readRouting', WITHOUT_REPLICAS);
    return;
  }
  const keyOf = (accountId: number) => `${keyPrefix}wal-position:${accountId}`;

  app.addHook('onRequest', async (request) => {
    if (READ_METHODS.has(request.method)) request.reader = replicas.reader(0n) ?? null;
  });

  app.decorate('readRouting', {
    async forAccount(request, accountId) {
      if (request.reader === null) return;
      request.reader = redis === null ? null : ((await ownReplica(replicas, redis, keyOf(accountId), request)) ?? null);
    },
    toPrimary(request) {
      if (request.reader === null) return false;
      request.reader = null;
      return true;
    },
  } satisfies ReadRouting);

  if (redis === null) return;
  const ttl = String(positionTtlMs(maxLagMs));
  // Before the answer leaves: the client may send its next read the moment it has it.
  app.addHook('onSend', async (request, reply, payload) => {
    const accountId = request.currentUser?.account.id;
    // A refusal (4xx) wrote nothing; a 5xx may have failed after its commit.
    const refused = reply.statusCode >= 400 && reply.statusCode < 500;
    if (accountId === undefined || READ_METHODS.has(request.method) || refused) return payload;
    try {
      const { rows } = await sql<{ position: string }>`select pg_current_wal_insert_lsn()::text as position`.execute(database.writer);
      await redis.eval(RAISE_POSITION, 1, keyOf(accountId), parseWalPosition(rows[0]!.position).toString(), ttl);
    } catch (error) {
      // The account's next reads may miss this write on a lagging replica until Redis is back; the write itself stands.
      request.log.warn({ err: error }, 'could not keep the write position: reads may not see this write for a moment');
    }
    return payload;
  });
}

async function ownReplica(replicas: ReplicaSet, redis: Redis, key: string, request: FastifyRequest): Promise<Executor | undefined> {
  let stored: string | null;
  try {
    stored = await redis.get(key);
  } catch (error) {
    request.log.warn({ err: error }, 'Redis is unavailable: a signed-in read goes to the primary');
    return undefined;
  }
  return replicas.reader(stored === null ? 0n : BigInt(stored));
}
