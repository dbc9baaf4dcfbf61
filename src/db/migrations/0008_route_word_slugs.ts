import { type Kysely, sql } from 'kysely';

/** The API's paths under /api/articles/ when this migration was written: a slug equal to one could not be read. */
const ROUTE_WORDS_THEN = ['feed'];

/**
 * Articles whose slug is a route word (written before slugify avoided them) get the slug slugify gives such a title
 * now, `<word>-article`, or, when that is taken, the same with the article's id, so every article can be read.
 */
export const routeWordSlugs = {
  async up(db: Kysely<unknown>) {
    const { rows } = await sql<{ id: number; slug: string }>`
      select id, slug from articles where slug in (${sql.join(ROUTE_WORDS_THEN)})`.execute(db);
    for (const { id, slug } of rows) {
      const candidates = [`${slug}-article`, `${slug}-article-${id}`];
      for (const candidate of candidates) {
        const taken = await sql`select 1 from articles where slug = ${candidate}`.execute(db);
        if (taken.rows.length > 0) continue;
        await sql`update articles set slug = ${candidate} where id = ${id}`.execute(db);
        break;
      }
    }
  },
  // The old slugs could not be read; nothing worth restoring.
  async down() {},
};
