import { sql } from 'kysely';
import type { Executor } from '../../db/index.js';
import { pageOf } from '../../id-cursor.js';
import { toIso } from '../../schemas.js';

/** A page of the audit log, newest first, each entry's actor named by a join: one query whatever the page size. */
export async function listAuditLog(db: Executor, page: { limit: number; before?: number }) {
  const rows = await db
    .selectFrom('audit_log')
    .leftJoin('users', 'users.id', 'audit_log.actor_id')
    .select([
      'audit_log.id',
      'audit_log.actor_id',
      'users.username',
      'audit_log.action',
      'audit_log.target_type',
      'audit_log.target_id',
      'audit_log.reason',
      'audit_log.created_at',
    ])
    .$if(page.before !== undefined, (query) => query.where('audit_log.id', '<', page.before!))
    .orderBy('audit_log.id', 'desc')
    .limit(sql.lit(page.limit + 1))
    .execute();
  const { page: shown, nextCursor } = pageOf(
    rows.map((row) => ({ ...row, id: Number(row.id) })),
    page.limit,
  );
  return {
    entries: shown.map((row) => ({
      id: row.id,
      actor: row.actor_id === null ? 'system' : (row.username ?? `#${row.actor_id}`),
      action: row.action,
      target: { type: row.target_type, id: Number(row.target_id) },
      reason: row.reason,
      createdAt: toIso(Number(row.created_at)),
    })),
    nextCursor,
  };
}
