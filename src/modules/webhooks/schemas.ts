import { Type } from 'typebox';
import { MESSAGE_KEYWORD } from '../../plugins/validation.js';
import { Defaulted, INTEGER_ID_MAX, NullableString, Timestamp, UrlInteger, Wrapped } from '../../schemas.js';
import { EVENT_TYPES } from '../events/catalogue.js';

/** Past this many endpoints a user gets 422: each one is a fan-out row on every event of theirs. */
export const ENDPOINTS_MAX = 10;
export const DELIVERY_PAGE_MAX = 100;

/** The envelope's `id` is a string (events/stream.ts), so the event ids here are too: what a receiver got, it can send back. */
const EventId = Type.String({ pattern: '^[1-9][0-9]{0,14}$', [MESSAGE_KEYWORD]: 'must be the id of an event, as in the message' });

export const NewWebhookBody = Wrapped(
  'webhook',
  Type.Object({
    // The sender refuses longer URLs too; the schema says so before anything else is checked.
    url: Type.String({ minLength: 1, maxLength: 2_000, description: 'http or https; private and reserved addresses are refused' }),
    events: Type.Array(Type.Enum([...EVENT_TYPES]), {
      minItems: 1,
      maxItems: EVENT_TYPES.length,
      uniqueItems: true,
      description: 'The event types to receive',
    }),
  }),
);

export const WebhookParams = Type.Object({ id: UrlInteger({ minimum: 1, maximum: INTEGER_ID_MAX }) });

const webhookFields = {
  id: Type.Integer(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  disabledReason: NullableString({ description: 'Why deliveries stopped, until the endpoint is enabled again' }),
  createdAt: Timestamp,
};

export const Webhook = Type.Object(webhookFields);
export const WebhookResponse = Wrapped('webhook', Webhook);
export const WebhookListResponse = Type.Object({ webhooks: Type.Array(Webhook) });
/** Only creating an endpoint and rotating its secret show the secret; nothing reads it back later. */
export const WebhookWithSecretResponse = Wrapped(
  'webhook',
  Type.Object({ ...webhookFields, secret: Type.String({ description: 'Verifies the webhook-signature header; shown once' }) }),
);

const NullableInteger = Type.Unsafe<number | null>({ type: ['integer', 'null'] });

export const Delivery = Type.Object({
  id: Type.Integer(),
  eventId: EventId,
  eventType: Type.String(),
  status: Type.Enum(['pending', 'delivered', 'failed']),
  attempts: Type.Integer(),
  lastStatus: NullableInteger,
  lastLatencyMs: NullableInteger,
  lastError: NullableString(),
  createdAt: Timestamp,
  finishedAt: NullableString({ format: 'date-time' }),
  nextAttemptAt: NullableString({ format: 'date-time', description: 'While pending' }),
});

export const DeliveryQuery = Type.Object({
  limit: Defaulted(UrlInteger({ minimum: 1, maximum: DELIVERY_PAGE_MAX, default: 20 })),
  cursor: Type.Optional(Type.String({ maxLength: 64, description: 'nextCursor of the page before' })),
});

export const DeliveryListResponse = Type.Object({
  deliveries: Type.Array(Delivery),
  nextCursor: NullableString({ description: 'Where the next, older page starts; null on the last page' }),
});

export const ReplayBody = Type.Object({ eventId: EventId });
export const DeliveryResponse = Type.Object({ delivery: Delivery });
