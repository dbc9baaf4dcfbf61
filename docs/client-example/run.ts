/**
 * `tsx docs/client-example/run.ts [base URL]`: the tour against a running server (e.g. http://127.0.0.1:3000/api),
 * or without a URL against the app started here on a throwaway SQLite database; exits 1 if an answer is not what
 * the tour's calls should have produced.
 */
import assert from 'node:assert/strict';
import { buildApp } from '../../src/app.js';
import { createScratchDatabase, testConfig } from '../../test/support/app.js';
import { tour } from './conduit.js';

/** The tour's checks: the calls went through and their answers fit together. */
async function check(baseUrl: string) {
  const seen = await tour(baseUrl, Date.now().toString(36));
  assert.equal(seen.me.username, seen.comment.author.username);
  assert.equal(seen.profile.username, seen.fetched.author.username);
  assert.equal(seen.updated.bio, 'Reads everything');
  assert.equal(seen.followed.following, true);
  assert.equal(seen.unfollowed.following, false);
  // The defaults the lists were called without: the new article is on the first page of both.
  assert.ok(seen.everything.articles.some((article) => article.slug === seen.fetched.slug));
  assert.ok(seen.feed.articles.some((article) => article.slug === seen.fetched.slug));
  assert.ok(seen.tagged.articles.length <= 5);
  assert.equal(seen.edited.description, 'Typed end to end');
  assert.deepEqual([seen.favorited.favoritesCount, seen.unfavorited.favoritesCount], [1, 0]);
  assert.ok(seen.comments.some((comment) => comment.id === seen.comment.id));
  assert.ok(seen.tags.includes('openapi'));
  assert.deepEqual(seen.gone, { status: 404, errors: { article: ['not found'] } });
  console.log(`client example: every endpoint answered as expected at ${baseUrl}`);
}

const url = process.argv[2];
if (url !== undefined) {
  await check(url);
} else {
  const scratch = await createScratchDatabase('sqlite');
  const app = await buildApp(testConfig(scratch.url));
  try {
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    await check(`${address}/api`);
  } finally {
    await app.close();
    await scratch.drop();
  }
}
