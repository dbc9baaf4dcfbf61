import pg from 'pg';

/** Says once, clearly, whether the PostgreSQL half runs, and fails fast when its URL does not answer. */
export default async function globalSetup(): Promise<void> {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    console.log(
      '\n[conduit] PostgreSQL tests SKIPPED: set TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test) to run them.\n',
    );
    return;
  }
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query('select 1');
  } catch (error) {
    throw new Error(`TEST_DATABASE_URL is set but PostgreSQL does not answer: ${String(error)}`);
  } finally {
    await client.end().catch(() => {});
  }
  console.log(`\n[conduit] PostgreSQL tests enabled (TEST_DATABASE_URL=${new URL(url).host}).\n`);
}
