/**
 * A typed Conduit client: openapi-fetch over the types openapi-typescript generates from /api/openapi.json.
 * Paths, parameters, bodies and answers are all checked by the compiler; nothing here is written by hand but the
 * calls themselves. `tour` calls every endpoint once, as a frontend would in a session.
 */
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/api.js';

export type Conduit = Client<paths>;

/** One client per identity: a signed-in user's sends the token with every request. */
export function createConduit(baseUrl: string, token?: string): Conduit {
  return createClient<paths>({ baseUrl, headers: token === undefined ? {} : { Authorization: `Token ${token}` } });
}

/** Every error the API sends has one shape, whatever the operation or status: this one's 500 stands for them all. */
type ErrorBody = paths['/tags']['get']['responses'][500]['content']['application/json'];

/** The success body; an error answer becomes an exception carrying the server's messages. */
async function expectSuccess<Data>(call: Promise<{ data?: Data; error?: ErrorBody; response: Response }>): Promise<Data> {
  const { data, error, response } = await call;
  if (!response.ok) throw new Error(`${response.status} from ${response.url}: ${JSON.stringify(error?.errors)}`);
  // openapi-fetch leaves `data` undefined only for answers without a body (204), whose Data is empty as well.
  return data as Data;
}

/**
 * Registers two users, an author and a reader, and goes through every endpoint with them; returns what a caller
 * would check. `suffix` keeps the names unique on a server that already has users.
 */
export async function tour(baseUrl: string, suffix: string) {
  const anonymous = createConduit(baseUrl);
  const password = 'correct horse battery staple';
  const register = (name: string) =>
    expectSuccess(
      anonymous.POST('/users', { body: { user: { username: `${name}${suffix}`, email: `${name}${suffix}@example.com`, password } } }),
    );

  const { user: author } = await register('author');
  const { user: reader } = await register('reader');
  const { user: signedIn } = await expectSuccess(anonymous.POST('/users/login', { body: { user: { email: reader.email, password } } }));
  const asAuthor = createConduit(baseUrl, author.token);
  const asReader = createConduit(baseUrl, signedIn.token);

  const me = await expectSuccess(asReader.GET('/user'));
  const updated = await expectSuccess(asReader.PUT('/user', { body: { user: { bio: 'Reads everything' } } }));

  const profile = await expectSuccess(anonymous.GET('/profiles/{username}', { params: { path: { username: author.username } } }));
  const followPath = { params: { path: { username: author.username } } };
  const followed = await expectSuccess(asReader.POST('/profiles/{username}/follow', followPath));

  const { article } = await expectSuccess(
    asAuthor.POST('/articles', {
      body: {
        article: {
          title: `Typed clients ${suffix}`,
          description: 'Generated from the OpenAPI document',
          body: 'openapi-typescript writes the types, openapi-fetch makes the calls.',
          tagList: ['openapi', 'typescript'],
        },
      },
    }),
  );
  const slugPath = { params: { path: { slug: article.slug } } };

  // Neither list needs limit or offset: the server fills in their defaults, and the types know they are optional.
  const everything = await expectSuccess(anonymous.GET('/articles'));
  const feed = await expectSuccess(asReader.GET('/articles/feed'));
  const tagged = await expectSuccess(anonymous.GET('/articles', { params: { query: { tag: 'openapi', limit: 5 } } }));

  const fetched = await expectSuccess(asReader.GET('/articles/{slug}', slugPath));
  const edited = await expectSuccess(
    asAuthor.PUT('/articles/{slug}', { ...slugPath, body: { article: { description: 'Typed end to end' } } }),
  );
  const favorited = await expectSuccess(asReader.POST('/articles/{slug}/favorite', slugPath));
  const unfavorited = await expectSuccess(asReader.DELETE('/articles/{slug}/favorite', slugPath));

  const { comment } = await expectSuccess(
    asReader.POST('/articles/{slug}/comments', { ...slugPath, body: { comment: { body: 'Finally, no any.' } } }),
  );
  const comments = await expectSuccess(anonymous.GET('/articles/{slug}/comments', slugPath));
  await expectSuccess(asReader.DELETE('/articles/{slug}/comments/{id}', { params: { path: { slug: article.slug, id: comment.id } } }));

  const { tags } = await expectSuccess(anonymous.GET('/tags'));
  const unfollowed = await expectSuccess(asReader.DELETE('/profiles/{username}/follow', followPath));
  await expectSuccess(asAuthor.DELETE('/articles/{slug}', slugPath));

  // Errors are typed too: every status shares the error body, so its messages can be read without a cast.
  const gone = await asReader.GET('/articles/{slug}', slugPath);

  return {
    me: me.user,
    updated: updated.user,
    profile: profile.profile,
    followed: followed.profile,
    unfollowed: unfollowed.profile,
    everything,
    feed,
    tagged,
    fetched: fetched.article,
    edited: edited.article,
    favorited: favorited.article,
    unfavorited: unfavorited.article,
    comment,
    comments: comments.comments,
    tags,
    gone: { status: gone.response.status, errors: gone.error?.errors },
  };
}
