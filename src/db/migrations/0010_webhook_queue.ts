import { type Kysely, sql } from 'kysely';

/**
 * The pending deliveries of each endpoint in event order, and only those: the worker sends an endpoint's oldest pending
 * delivery and nothing behind it, and asks for that head on every claim. The (endpoint_id, id) index would walk every
 * delivery the endpoint ever had to find it; this one holds just the queue, on both databases.
 */
export const webhookQueue = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createIndex('webhook_deliveries_queue_idx')
      .on('webhook_deliveries')
      .columns(['endpoint_id', 'event_id', 'id'])
      .where(sql.ref('status'), '=', 'pending')
      .execute();
  },

  async down(db: Kysely<unknown>) {
    await db.schema.dropIndex('webhook_deliveries_queue_idx').execute();
  },
};
