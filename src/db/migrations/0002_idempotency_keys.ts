import { type Kysely, sql } from 'kysely';

export const idempotencyKeys = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('idempotency_keys')
      .addColumn('scope', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('request_hash', 'text', (c) => c.notNull())
      .addColumn('claim', 'text', (c) => c.notNull())
      .addColumn('status', 'integer')
      .addColumn('response', 'text')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      // The primary key is what settles two requests claiming one key at the same moment.
      .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'key'])
      // A finished request has both its status and its body; a running one has neither.
      .addCheckConstraint('idempotency_keys_response_complete', sql`(status is null) = (response is null)`)
      .execute();
    // Purging walks the oldest keys.
    await db.schema.createIndex('idempotency_keys_created_idx').on('idempotency_keys').column('created_at').execute();
  },

  async down(db: Kysely<unknown>) {
    await db.schema.dropTable('idempotency_keys').execute();
  },
};
