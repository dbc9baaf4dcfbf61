import type { Compilable, CompiledQuery } from 'kysely';
import { perDatabase } from './per-database.js';
import type { Executor } from './schema.js';

/**
 * Runs a compiled query on the driver itself, without Kysely's connection handling in between, or answers
 * `undefined` when it cannot do so safely right now (then Kysely runs it).
 */
export type DirectRunner = (query: CompiledQuery) => Promise<readonly unknown[]> | readonly unknown[] | undefined;

const directRunners = new WeakMap<Executor, DirectRunner>();

/**
 * Lets precompiled queries on `db` skip Kysely: for a primary-key lookup, Kysely's connection acquisition and
 * promise chain cost more than the lookup. Only a database handle gets one, never a transaction, whose
 * queries must run on its own connection.
 */
export function runPrecompiledDirectly(db: Executor, runner: DirectRunner): void {
  directRunners.set(db, runner);
}

/**
 * A query for the lookups behind every request, built and compiled once per database and then run with the
 * caller's parameters: Kysely's builder and compiler cost more than a primary-key lookup. `build` gets
 * placeholder values in the parameters' places, in the order the parameters are then given.
 */
export function precompiled<Row>(build: (db: Executor) => Compilable<Row>) {
  const compiledFor = perDatabase((db): CompiledQuery<Row> => build(db).compile());
  return async (db: Executor, parameters: readonly unknown[]): Promise<Row[]> => {
    const compiled = compiledFor(db);
    if (compiled.parameters.length !== parameters.length) {
      throw new Error(`a precompiled query takes ${compiled.parameters.length} parameters, not ${parameters.length}: ${compiled.sql}`);
    }
    const query = { ...compiled, parameters };
    const direct = directRunners.get(db)?.(query);
    return direct === undefined ? (await db.executeQuery<Row>(query)).rows : ((await direct) as Row[]);
  };
}
