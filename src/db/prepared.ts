import type { Compilable, CompiledQuery } from 'kysely';
import { setWithin } from '../bounded-map.js';
import { dialectOf, type Executor } from './index.js';
import { nameStatement } from './statement-names.js';

/**
 * Kysely builds a query as a tree of frozen nodes and compiles the tree to text on every call: on a list page that
 * was about a fifth of the request's CPU, for text that only a handful of shapes ever produce. A prepared query is
 * built and compiled once per shape, with a stand-in for each value, and later runs the same text with the values
 * of the call put where the stand-ins went. The same text each time also lets the drivers reuse their statements
 * (SQLite's statement cache, PostgreSQL's named statements: statement-names.ts).
 *
 * A shape is what changes the text: the dialect, which values are given (undefined and null are "not given", and
 * build as such), and `shape`, what the query writes into its text rather than binding (a page size). So `build`
 * must use a value only as a bound value or for whether it is given: never compute with it, compare it, or read
 * the clock or anything else outside its arguments, since whatever it reads is kept for every later call. A text
 * is kept whichever executor built it: plugins that rewrite queries would not see the later calls (the app has none).
 */
export interface PreparedQuery<Values extends object, Shape, Row> {
  execute(db: Executor, values: Values, ...shape: ShapeArgument<Shape>): Promise<Row[]>;
  executeTakeFirst(db: Executor, values: Values, ...shape: ShapeArgument<Shape>): Promise<Row | undefined>;
  /** The query text and parameters `execute` sends, for tests that hold it to a query built afresh. */
  compile(db: Executor, values: Values, ...shape: ShapeArgument<Shape>): CompiledQuery<Row>;
}

/** A query whose text depends on its values alone takes no shape. */
type ShapeArgument<Shape> = undefined extends Shape ? [] : [shape: Shape];

/** Where a value goes: one of the call's values, or a constant of the text. */
type ParameterSource = { value: string } | { constant: unknown };

interface Template<Row> {
  query: CompiledQuery<Row>;
  sources: ParameterSource[];
}

class StandIn {
  constructor(readonly value: string) {}
}

/**
 * Texts kept per prepared query. The shapes real traffic uses fit many times over; a client that cycles through rare
 * ones (every page size with every filter) makes the oldest be built again, at the cost every call paid before.
 */
const SHAPES_PER_QUERY = 512;

const isGiven = (value: unknown) => value !== undefined && value !== null;

export function preparedQuery<Values extends object, Row, Shape extends number | undefined = undefined>(
  build: (db: Executor, values: Values, shape: Shape) => Compilable<Row>,
): PreparedQuery<Values, Shape, Row> {
  const templates = new Map<string, Template<Row>>();

  function template(db: Executor, values: Values, shape: Shape): Template<Row> {
    const dialect = dialectOf(db);
    let key = `${dialect}|${shape}|`;
    for (const name in values) if (isGiven(values[name])) key += `${name},`;
    let found = templates.get(key);
    if (found === undefined) {
      const standIns = Object.fromEntries(
        Object.entries(values).map(([name, value]) => [name, isGiven(value) ? new StandIn(name) : value]),
      ) as Values;
      const query = build(db, standIns, shape).compile();
      const sources = query.parameters.map((parameter) =>
        parameter instanceof StandIn ? { value: parameter.value } : { constant: parameter },
      );
      found = { query, sources };
      if (dialect === 'postgres') nameStatement(query.sql);
      setWithin(templates, SHAPES_PER_QUERY, key, found);
    }
    return found;
  }

  function compile(db: Executor, values: Values, ...[shape]: ShapeArgument<Shape>): CompiledQuery<Row> {
    const { query, sources } = template(db, values, shape as Shape);
    const given = values as Record<string, unknown>;
    const parameters = sources.map((source) => ('value' in source ? given[source.value] : source.constant));
    return { ...query, parameters };
  }

  async function execute(db: Executor, values: Values, ...shape: ShapeArgument<Shape>): Promise<Row[]> {
    return (await db.executeQuery(compile(db, values, ...shape))).rows;
  }

  return {
    compile,
    execute,
    async executeTakeFirst(db, values, ...shape) {
      return (await execute(db, values, ...shape))[0];
    },
  };
}
