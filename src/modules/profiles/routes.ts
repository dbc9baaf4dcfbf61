import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { isForeignKeyViolation } from '../../db/constraints.js';
import { notFound, unprocessable } from '../../errors.js';
import { setLastModified } from '../../plugins/conditional-get.js';
import { errorResponses } from '../../schemas.js';
import { signedIn, viewerId } from '../users/auth.js';
import { findProfile, setFollow, toProfile } from './queries.js';
import { ProfileResponse, UsernameParams } from './schemas.js';

/**
 * Only anonymous answers have one: the user's row time bounds everything they show (`following` is always false).
 * A signed-in viewer's `following` changes with follows and unfollows, which leave no time behind once undone.
 */
const LAST_MODIFIED = {
  type: 'string',
  description: 'When the name, bio or image last changed; anonymous requests only, and not within the current second',
};

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
      const profile = await findProfile(request.db, request.params.username, viewer);
      if (profile === undefined) throw notFound('profile');
      if (viewer === null) setLastModified(reply, profile.updated_at);
      return { profile: toProfile(profile) };
    },
  );

  const followSchema = (operationId: string, summary: string) => ({
    tags: ['profiles'],
    operationId,
    summary,
    params: UsernameParams,
    response: { 200: ProfileResponse, ...errorResponses(401, 404, 422) },
  });

  app.post(
    '/profiles/:username/follow',
    { config: { auth: 'required' }, schema: followSchema('FollowUserByUsername', 'Follow a user') },
    async (request) => {
      const me = signedIn(request).account;
      const profile = await findProfile(request.db, request.params.username, me.id);
      if (profile === undefined) throw notFound('profile');
      if (profile.id === me.id) throw unprocessable('profile', 'cannot follow yourself');
      try {
        await setFollow(request.db, me, profile, true, Date.now());
      } catch (error) {
        // The user was deleted between the lookup and the insert.
        if (isForeignKeyViolation(error)) throw notFound('profile');
        throw error;
      }
      return { profile: toProfile({ ...profile, following: true }) };
    },
  );

  app.delete(
    '/profiles/:username/follow',
    { config: { auth: 'required' }, schema: followSchema('UnfollowUserByUsername', 'Unfollow a user') },
    async (request) => {
      const me = signedIn(request).account;
      const profile = await findProfile(request.db, request.params.username, me.id);
      if (profile === undefined) throw notFound('profile');
      await setFollow(request.db, me, profile, false, Date.now());
      return { profile: toProfile({ ...profile, following: false }) };
    },
  );
};
