import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { Static } from 'typebox';
import { isForeignKeyViolation } from '../../db/constraints.js';
import { forbidden, notFound, unprocessable } from '../../errors.js';
import { setLastModified } from '../../plugins/conditional-get.js';
import { errorResponses } from '../../schemas.js';
import { signedIn, viewerId } from '../users/auth.js';
import { areSeparated, type Screen, screeningOf, setScreen } from './blocks.js';
import { findProfile, setFollow, toProfile, toViewedProfile } from './queries.js';
import { ProfileResponse, UsernameParams } from './schemas.js';

/**
 * Only anonymous answers have one: the profile's own time bounds everything they show (`following` is always false),
 * and moves with nothing they do not show, such as an email or password change.
 * A signed-in viewer's `following` changes with follows and unfollows, which leave no time behind once undone.
 */
const LAST_MODIFIED = {
  type: 'string',
  description: 'When the name, bio or image last changed; anonymous requests only, and not within the current second',
};

const SCREEN_ROUTES: ReadonlyArray<{ screen: Screen; on: boolean; operationId: string; summary: string }> = [
  {
    screen: 'block',
    on: true,
    operationId: 'BlockUserByUsername',
    summary: "Block a user: the follows between you end, and neither sees or acts on the other's articles and comments",
  },
  { screen: 'block', on: false, operationId: 'UnblockUserByUsername', summary: 'Lift a block' },
  {
    screen: 'mute',
    on: true,
    operationId: 'MuteUserByUsername',
    summary: 'Mute a user: their articles and comments leave your lists, silently',
  },
  { screen: 'mute', on: false, operationId: 'UnmuteUserByUsername', summary: 'Lift a mute' },
];

export const profilesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/profiles/:username',
    {
      config: { auth: 'optional' },
      schema: {
        tags: ['profiles'],
        operationId: 'GetProfileByUsername',
        summary: 'Get a profile',
        params: UsernameParams,
        response: { 200: { ...ProfileResponse, headers: { 'Last-Modified': LAST_MODIFIED } }, ...errorResponses(401, 404, 422) },
      },
    },
    async (request, reply) => {
      const viewer = viewerId(request);
      const profile = await findProfile(request.db, request.params.username, viewer, screeningOf(request));
      if (profile === undefined) throw notFound('profile');
      if (viewer === null) {
        setLastModified(reply, profile.profile_updated_at);
        return { profile: toProfile(profile) };
      }
      return { profile: toViewedProfile(profile) };
    },
  );

  const relationSchema = (operationId: string, summary: string) => ({
    tags: ['profiles'],
    operationId,
    summary,
    params: UsernameParams,
    response: { 200: ProfileResponse, ...errorResponses(401, 403, 404, 422) },
  });

  /** The other user of a follow, block or mute, as the caller sees them; 404 when there is none. */
  const otherUser = async (request: FastifyRequest<{ Params: Static<typeof UsernameParams> }>) => {
    const profile = await findProfile(request.db, request.params.username, viewerId(request), screeningOf(request));
    if (profile === undefined) throw notFound('profile');
    return profile;
  };

  app.post(
    '/profiles/:username/follow',
    { config: { auth: 'required' }, schema: relationSchema('FollowUserByUsername', 'Follow a user') },
    async (request) => {
      const me = signedIn(request).account;
      const profile = await otherUser(request);
      if (profile.id === me.id) throw unprocessable('profile', 'cannot follow yourself');
      let changed: boolean;
      try {
        changed = await setFollow(request.db, me, profile, true, Date.now());
      } catch (error) {
        // The user was deleted between the lookup and the insert.
        if (isForeignKeyViolation(error)) throw notFound('profile');
        throw error;
      }
      // Nothing written: a repeat, or a block between the two; only the second is asked, and only then.
      if (!changed && (await areSeparated(request.db, me.id, profile.id))) throw forbidden('profile');
      return { profile: toViewedProfile({ ...profile, following: true }) };
    },
  );

  app.delete(
    '/profiles/:username/follow',
    { config: { auth: 'required' }, schema: relationSchema('UnfollowUserByUsername', 'Unfollow a user') },
    async (request) => {
      const me = signedIn(request).account;
      const profile = await otherUser(request);
      await setFollow(request.db, me, profile, false, Date.now());
      return { profile: toViewedProfile({ ...profile, following: false }) };
    },
  );

  for (const route of SCREEN_ROUTES) {
    app.route({
      method: route.on ? 'POST' : 'DELETE',
      url: `/profiles/:username/${route.screen}`,
      config: { auth: 'required' },
      schema: relationSchema(route.operationId, route.summary),
      handler: async (request) => {
        const me = signedIn(request).account;
        const profile = await otherUser(request);
        if (profile.id === me.id) throw unprocessable('profile', `cannot ${route.screen} yourself`);
        try {
          await setScreen(request.db, route.screen, me, profile, route.on, Date.now());
        } catch (error) {
          if (isForeignKeyViolation(error)) throw notFound('profile');
          throw error;
        }
        // What the write changed, without reading again: a block ends the caller's follow too.
        const following = route.screen === 'block' && route.on ? false : profile.following;
        const flag = route.screen === 'block' ? 'blocking' : 'muting';
        return { profile: toViewedProfile({ ...profile, following, [flag]: route.on }) };
      },
    });
  }
};
