import { type Kysely, sql } from 'kysely';

/**
 * What the worker needs to share delivery slots fairly between owners (webhooks/queue.ts): which deliveries are on
 * their way right now (`leased_until`, cleared when the attempt is recorded; next_attempt_at alone cannot tell a
 * lease from a retry's backoff), and when each endpoint last had one claimed, so that the owner served longest ago
 * goes first. Both are new nullable columns: no table is rewritten.
 */
export const webhookFairShare = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('webhook_deliveries').addColumn('leased_until', 'bigint').execute();
    // The few deliveries on their way (or whose sender died with them), counted per owner by every claim.
    await db.schema
      .createIndex('webhook_deliveries_leased_idx')
      .on('webhook_deliveries')
      .column('leased_until')
      .where(sql.ref('leased_until'), 'is not', null)
      .execute();
    await db.schema.alterTable('webhook_endpoints').addColumn('last_claimed_at', 'bigint').execute();
  },

  async down(db: Kysely<unknown>) {
    await db.schema.alterTable('webhook_endpoints').dropColumn('last_claimed_at').execute();
    await db.schema.dropIndex('webhook_deliveries_leased_idx').execute();
    await db.schema.alterTable('webhook_deliveries').dropColumn('leased_until').execute();
  },
};
