import type { Compilable, CompiledQuery } from 'kysely';
import type { Executor } from './index.js';
import { perDatabase } from './per-database.js';

/**
 * A query for the lookups behind every request, built and compiled once per database and then run with the
 * caller's parameters: Kysely's builder and compiler cost more than a primary-key lookup. `build` gets
 * placeholder values in the parameters' places, in the order the parameters are then given.
 */
export function precompiled<Row>(build: (db: Executor) => Compilable<Row>) {
  const compiledFor = perDatabase((db): CompiledQuery<Row> => build(db).compile());
  return async (db: Executor, parameters: readonly unknown[]): Promise<Row[]> => {
    const query = compiledFor(db);
    if (query.parameters.length !== parameters.length) {
      throw new Error(`a precompiled query takes ${query.parameters.length} parameters, not ${parameters.length}: ${query.sql}`);
    }
    return (await db.executeQuery<Row>({ ...query, parameters })).rows;
  };
}
