import { Type } from 'typebox';
import { MESSAGE_KEYWORD } from '../../plugins/validation.js';
import { UrlText } from '../../schemas.js';
import { EVENT_TYPES, type EventType, isPublic } from './catalogue.js';

export const PUBLIC_EVENT_TYPES: readonly EventType[] = EVENT_TYPES.filter(isPublic);

const typeName = `(${PUBLIC_EVENT_TYPES.map((type) => type.replace('.', '\\.')).join('|')})`;

/** Empty (`?tag=`) means no filter, as on the article list. */
const filter = (description: string) => Type.Optional(UrlText({ maxLength: 256, description }));

/** Event ids as the stream sends them; fifteen digits keep any of them a safe integer. */
const eventId = (description: string) =>
  Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', [MESSAGE_KEYWORD]: 'must be an event id from this stream', description }));

export const EventsQuery = Type.Object({
  tag: filter('Only the article.created and article.updated events of articles with this tag'),
  author: filter("Only the events of this user's articles and of the comments on them (404 when there is no such user)"),
  types: Type.Optional(
    Type.String({
      pattern: `^(${typeName}(,${typeName})*)?$`,
      [MESSAGE_KEYWORD]: `must be a comma-separated list of ${PUBLIC_EVENT_TYPES.join(', ')}`,
      description: `Only these types, comma-separated: ${PUBLIC_EVENT_TYPES.join(', ')}`,
    }),
  ),
  lastEventId: eventId('Resumes after this event, as the Last-Event-ID header does, for clients that cannot send that header'),
});

export const EventsHeaders = Type.Object({
  'last-event-id': eventId('Resumes after this event: the ones missed since come first, then the stream goes on live'),
});

export const EVENT_STREAM_DESCRIPTION =
  'Server-Sent Events. Each message has `id:` (the event id), `event:` (its type, or `notification`) and `data:` ' +
  '(`{"id","type","version","timestamp","data"}`, `data` in the API\'s own shapes). Anyone gets the public events ' +
  '(articles and comments) that pass the filters; a signed-in user also gets, as `notification` and whatever the ' +
  'filters, what others did to them: a follow, a favorite of or a comment on their article. A `: ping` comment comes ' +
  'while nothing happens. Reconnecting with `Last-Event-ID` (EventSource does) sends what was missed first, nothing twice; ' +
  'a long replay comes in parts, each ending with a comment and an `id:` line without data: reconnect with that id.';
