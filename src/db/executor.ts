import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * A database handle or a transaction, as index.ts's `Executor` (the same type), for the modules that index.ts
 * itself imports: importing index.ts back would close a cycle.
 */
export type Executor = Kysely<Database>;
