import { expect, it } from 'vitest';
import { seedDatabase } from '../src/cli/seed.js';
import { usernameSkeleton } from '../src/identity.js';
import { describeEachDatabase } from './support/app.js';
import { call, createArticle, registerUser, setFavorite, unique } from './support/client.js';
import { grantRole } from './support/moderation.js';

/** The name in fullwidth forms ("ｊａｋｅ"), which registration folds (NFKC) into the name itself. */
const fullwidth = (username: string) =>
  Array.from(username, (character) => String.fromCodePoint(character.codePointAt(0)! + 0xfee0)).join('');

const LOOKALIKE = { errors: { username: ['looks too much like an existing username'] } };

describeEachDatabase('usernames typed in another form', (ctx) => {
  const app = () => ctx().app;

  it('finds the user by the fullwidth form of the name on every route that takes a username, and in the author filters', async () => {
    const [user, viewer, admin] = [
      await registerUser(app(), 'jake'),
      await registerUser(app(), 'viewer'),
      await registerUser(app(), 'admin'),
    ];
    await grantRole(app(), admin, 'admin');
    const article = await createArticle(app(), user.token);
    await setFavorite(app(), user.token, article.slug);
    const typed = encodeURIComponent(fullwidth(user.username));
    const username = (body: any) => body.profile?.username ?? body.user?.username;

    const answers: Record<string, [number, unknown]> = {};
    const ask = async (method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, token?: string, body?: unknown) => {
      const response = await call(app(), method, `/api/${path}`, { token, body });
      answers[`${method} ${path}`] = [response.status, username(response.body) ?? response.body.articles?.map((a: any) => a.slug)];
    };
    await ask('GET', `profiles/${typed}`);
    for (const relation of ['follow', 'block', 'mute']) {
      await ask('POST', `profiles/${typed}/${relation}`, viewer.token);
      await ask('DELETE', `profiles/${typed}/${relation}`, viewer.token);
    }
    await ask('POST', `profiles/${typed}/report`, viewer.token, { report: { reason: 'spam' } });
    await ask('PUT', `moderation/users/${typed}`, admin.token, { user: { role: 'moderator' } });
    await ask('POST', `moderation/users/${typed}/suspend`, admin.token, { moderation: { reason: 'Breaks rule 1' } });
    await ask('POST', `moderation/users/${typed}/unsuspend`, admin.token, { moderation: {} });
    await ask('GET', `articles?author=${typed}`);
    await ask('GET', `articles?favorited=${typed}`);
    const found = (status: number) => [status, user.username];
    expect(answers).toEqual({
      [`GET profiles/${typed}`]: found(200),
      ...Object.fromEntries(
        ['follow', 'block', 'mute'].flatMap((relation) => [
          [`POST profiles/${typed}/${relation}`, found(200)],
          [`DELETE profiles/${typed}/${relation}`, found(200)],
        ]),
      ),
      // A report answers with the report, which names no username.
      [`POST profiles/${typed}/report`]: [201, undefined],
      [`PUT moderation/users/${typed}`]: found(200),
      [`POST moderation/users/${typed}/suspend`]: found(200),
      [`POST moderation/users/${typed}/unsuspend`]: found(200),
      [`GET articles?author=${typed}`]: [200, [article.slug]],
      [`GET articles?favorited=${typed}`]: [200, [article.slug]],
    });
    const feed = await app().inject({ method: 'GET', url: `/feeds/authors/${typed}/articles.json` });
    expect([feed.statusCode, feed.body.includes(article.slug)]).toEqual([200, true]);
  });

  it('gives the users `conduit seed` writes their skeletons, so that a lookalike of one is refused', async () => {
    const before = await app()
      .db.selectFrom('users')
      .select((eb) => eb.fn.max('id').as('id'))
      .executeTakeFirstOrThrow();
    await seedDatabase(app().db, { users: 8, articles: 0, comments: 0, follows: 0, favorites: 0, seedValue: 29 });
    const seeded = await app()
      .db.selectFrom('users')
      .select(['username', 'username_skeleton'])
      .where('id', '>', Number(before.id ?? 0))
      .execute();
    expect(seeded).toHaveLength(8);
    expect(seeded).toEqual(seeded.map(({ username }) => ({ username, username_skeleton: usernameSkeleton(username) })));

    // Latin a, e and o written in Cyrillic: the same letters to the eye.
    const { username } = seeded[0]!;
    const lookalike = username.replace(/[aeo]/g, (letter) => ({ a: '\u0430', e: '\u0435', o: '\u043e' })[letter]!);
    expect(lookalike).not.toBe(username);
    const refused = await call(app(), 'POST', '/api/users', {
      body: { user: { username: lookalike, email: `${unique()}@example.com`, password: 'password123' } },
    });
    expect([refused.status, refused.body]).toEqual([409, LOOKALIKE]);
  });
});
