import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { isForeignKeyViolation } from '../../db/constraints.js';
import { notFound, unprocessable } from '../../errors.js';
import { errorResponses } from '../../schemas.js';
import { signedIn, viewerId } from '../users/auth.js';
import { findProfile, setFollow, toProfile } from './queries.js';
import { ProfileResponse, UsernameParams } from './schemas.js';

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
        response: { 200: ProfileResponse, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const profile = await findProfile(request.db, request.params.username, viewerId(request));
      if (profile === undefined) throw notFound('profile');
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
