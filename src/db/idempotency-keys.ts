import type { Executor } from './index.js';

export interface KeyClaim {
  scope: string;
  key: string;
  requestHash: string;
  /** Identifies this claim among those the key may have had; only its holder completes or releases it. */
  claim: string;
}

/** Claims older than these are free to take: the key has expired, or the request holding it has died. */
export interface StaleBefore {
  expired: number;
  abandoned: number;
}

/**
 * Claims the key for one request, in one statement: the primary key lets a single request in, and a stale row is
 * taken over by the update only while it is still stale, so two requests never both win. False: the key is held.
 */
export async function claimKey(db: Executor, entry: KeyClaim, now: number, stale: StaleBefore): Promise<boolean> {
  const result = await db
    .insertInto('idempotency_keys')
    .values({ scope: entry.scope, key: entry.key, request_hash: entry.requestHash, claim: entry.claim, created_at: now })
    .onConflict((conflict) =>
      conflict
        .columns(['scope', 'key'])
        .doUpdateSet((eb) => ({
          request_hash: eb.ref('excluded.request_hash'),
          claim: eb.ref('excluded.claim'),
          status: null,
          response: null,
          created_at: eb.ref('excluded.created_at'),
        }))
        .where((eb) =>
          eb.or([
            eb('idempotency_keys.created_at', '<', stale.expired),
            eb.and([eb('idempotency_keys.status', 'is', null), eb('idempotency_keys.created_at', '<', stale.abandoned)]),
          ]),
        ),
    )
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

/**
 * When the scope holds `limit` keys or more, when its oldest was created; undefined below that. Reads at most
 * `limit` entries of the primary key's index, so a caller at the cap costs no more than that.
 */
export async function oldestKeyAtLimit(db: Executor, scope: string, limit: number): Promise<number | undefined> {
  const atLimit = await db
    .selectFrom('idempotency_keys')
    .select('key')
    .where('scope', '=', scope)
    .orderBy('key')
    .offset(limit - 1)
    .limit(1)
    .executeTakeFirst();
  if (atLimit === undefined) return undefined;
  const oldest = await db
    .selectFrom('idempotency_keys')
    .select((eb) => eb.fn.min<number>('created_at').as('created_at'))
    .where('scope', '=', scope)
    .executeTakeFirstOrThrow();
  return Number(oldest.created_at);
}

export async function findKey(db: Executor, scope: string, key: string) {
  return db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status', 'response', 'claim'])
    .where('scope', '=', scope)
    .where('key', '=', key)
    .executeTakeFirst();
}

/** Records the response for replays; false when the claim was taken over meanwhile and the key is no longer ours. */
export async function completeKey(db: Executor, entry: KeyClaim, status: number, response: string): Promise<boolean> {
  const result = await db
    .updateTable('idempotency_keys')
    .set({ status, response })
    .where((eb) => eb.and({ scope: entry.scope, key: entry.key, claim: entry.claim }))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Gives the key up, so that the client's retry runs the request afresh. */
export async function releaseKey(db: Executor, entry: Omit<KeyClaim, 'requestHash'>): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where((eb) => eb.and({ scope: entry.scope, key: entry.key, claim: entry.claim }))
    .execute();
}

/**
 * Deletes up to `limit` keys created before `before` and says how many went. In bounded batches, so a large
 * backlog never holds a long lock; the subquery is there because neither database shares a `DELETE ... LIMIT`.
 */
export async function purgeExpiredKeys(db: Executor, before: number, limit: number): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where(({ eb, refTuple, selectFrom }) =>
      eb(
        refTuple('scope', 'key'),
        'in',
        selectFrom('idempotency_keys').select(['scope', 'key']).where('created_at', '<', before).limit(limit).$asTuple('scope', 'key'),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
