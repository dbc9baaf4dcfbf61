import type { Generated, Insertable, Kysely, Selectable } from 'kysely';

/** Timestamps are epoch milliseconds in a BIGINT/INTEGER column: identical on both databases and cheap to sort. */
type EpochMs = number;

export interface UsersTable {
  id: Generated<number>;
  username: string;
  /** Lower-cased copy computed in the app, so case-insensitive uniqueness is the same on SQLite and PostgreSQL. */
  username_key: string;
  /**
   * What the name looks like (identity.ts, UTS #39), unique so that no account passes for another. Null for rows the
   * seeder writes in bulk; an account that already looked like an older one when migration 0007 ran carries `#id`.
   */
  username_skeleton: string | null;
  email: string;
  email_key: string;
  password_hash: string;
  bio: string | null;
  image: string | null;
  /** Bumped by every password change; tokens carry the value they were issued under. */
  token_version: Generated<number>;
  /** The token (jti) that changed the password last: that session stays signed in, all others are revoked. */
  kept_session: string | null;
  /** Articles this user wrote and articles this user favorited, moved by triggers on those rows (migration 0005). */
  articles_count: Generated<number>;
  favorites_count: Generated<number>;
  /**
   * Set while the account is leaving (migration 0015): it is purged at this time, and until then it exists for itself
   * alone (users/leaving.ts).
   */
  purge_at: EpochMs | null;
  /** When the user last started an export of their account: one per account per 10 minutes (modules/export). */
  last_export_at: EpochMs | null;
  role: Generated<Role>;
  /** Set while suspended (modules/moderation): it reads but writes nothing until suspended_until, or until lifted. */
  suspended_at: EpochMs | null;
  suspended_until: EpochMs | null;
  suspension_reason: string | null;
  /**
   * How many accounts this user's reads leave out (blocks either way, the user's own mutes), kept by triggers on
   * blocks and mutes (migration 0018): a viewer with none skips the rule.
   */
  screened_count: Generated<number>;
  /** Whom screened_count counts (migration 0022, kept by triggers): a JSON array on SQLite, integer[] on PostgreSQL. */
  screened_ids: Generated<string | number[]>;
  created_at: EpochMs;
  /** Moves with every change of the account, email and password included. */
  updated_at: EpochMs;
  /**
   * Moves only when the name, bio or image changes: the Last-Modified of the profile (migration 0021). The app sets
   * it on every insert; a row inserted without it starts at 0, which only makes that profile look older.
   */
  profile_updated_at: Generated<EpochMs>;
}

/** A purged account's username, lookalike skeleton and email, as digests no other account may take until `until`. */
export interface ReservedIdentitiesTable {
  digest: string;
  until: EpochMs;
}

export interface FollowsTable {
  follower_id: number;
  followed_id: number;
  created_at: EpochMs;
}

export interface ArticlesTable {
  id: Generated<number>;
  slug: string;
  title: string;
  description: string;
  body: string;
  author_id: number;
  /** Moved by triggers on the favorites rows it counts. */
  favorites_count: Generated<number>;
  /**
   * The article's tag names as a JSON array, kept by triggers on article_tags (migration 0005): a list shows every
   * item's tags without a join. article_tags stays what filters use.
   */
  tag_list: Generated<string>;
  status: Generated<ArticleStatus>;
  /** When a scheduled article becomes public; null in every other state. */
  publish_at: EpochMs | null;
  /** When it first became public; never changes once set. */
  published_at: EpochMs | null;
  /**
   * Non-zero while public to nobody but its author, whatever its status: bit 1 while the author's account is being
   * deleted, bit 2 while a moderator hides it (articles/visibility.ts WITHHELD).
   */
  withheld: Generated<number>;
  /** Why a moderator hid it; null while it is not hidden. */
  hidden_reason: string | null;
  /**
   * When the article is or becomes public (publishedAt, or publishAt while scheduled), null when it is not to be
   * public: every public read asks `listed_at <= now` (articles/visibility.ts). Writers set it with `listedAt`; a
   * check constraint (migration 0013) refuses any other value.
   */
  listed_at: EpochMs | null;
  created_at: EpochMs;
  updated_at: EpochMs;
}

export const ARTICLE_STATUSES = ['draft', 'scheduled', 'published', 'unpublished'] as const;
export type ArticleStatus = (typeof ARTICLE_STATUSES)[number];

/** A kept version of an article's content (modules/revisions): one per create and per edit that changed it. */
export interface ArticleRevisionsTable {
  id: Generated<number>;
  article_id: number;
  title: string;
  description: string;
  body: string;
  /** The tag names as a JSON array. */
  tag_list: string;
  created_at: EpochMs;
}

export interface TagsTable {
  id: Generated<number>;
  name: string;
  /** Number of articles carrying the tag, moved by triggers on article_tags. */
  article_count: Generated<number>;
}

export interface ArticleTagsTable {
  article_id: number;
  tag_id: number;
  /**
   * The article's listed_at (when it is or becomes public; null while it is not public), kept by a trigger on
   * articles (migrations 0013, 0017), so a tag's public articles are read newest first from one index.
   */
  article_listed_at: EpochMs | null;
  /** 1 while the article is counted (its publication recorded, not withheld): the tag's count counts the link. */
  article_counted: Generated<number>;
}

export interface FavoritesTable {
  user_id: number;
  article_id: number;
  /** As in article_tags: a user's favorites are read newest listed article first from one index. */
  article_listed_at: EpochMs | null;
  /** As in article_tags: the user's favorites count counts the link. */
  article_counted: Generated<number>;
  created_at: EpochMs;
}

/** The number of all articles, spread over a few rows so that concurrent writers rarely share one (migration 0005). */
export interface ArticleTotalsTable {
  stripe: number;
  articles: number;
}

export interface CommentsTable {
  id: Generated<number>;
  article_id: number;
  author_id: number;
  body: string;
  /** Set while hidden (by a moderator or the article's author): the comment then shows only to its author. */
  hidden_reason: string | null;
  hidden_by: number | null;
  created_at: EpochMs;
  updated_at: EpochMs;
}

/** One row per Idempotency-Key a caller sent: the request it stands for and, once it has finished, its response. */
export interface IdempotencyKeysTable {
  /** Whose key it is (`user:<id>`, or `ip:<address>` before sign-in): callers never see each other's keys. */
  scope: string;
  key: string;
  /** HMAC of the method, path and canonical body: the same key with another request is refused, never replayed. */
  request_hash: string;
  /** Random per claim, so a request whose claim was taken over cannot complete or release the new one. */
  claim: string;
  /** Both null while the request runs. */
  status: number | null;
  response: string | null;
  /** When the current claim was taken: the key expires a day later, a running claim is abandoned after a minute. */
  created_at: EpochMs;
}

/** The outbox: one row per change users or integrators may care about, written in the change's own transaction. */
export interface EventsTable {
  id: Generated<number>;
  /** PostgreSQL's transaction id (0 on SQLite): the stream reads in (tx, id) order, see events/stream.ts. */
  tx: Generated<number>;
  type: string;
  actor_id: number | null;
  owner_id: number | null;
  article_id: number | null;
  comment_id: number | null;
  public: number;
  /** The event's `data` as JSON, in the API's own shapes. */
  data: string;
  created_at: EpochMs;
}

/** The event types migrations know, with what each fans out to (the trigger of migration 0009 reads it). */
export interface EventTypesTable {
  name: string;
  bit: number;
  notifies: string | null;
  takes_back: string | null;
}

export interface NotificationsTable {
  id: Generated<number>;
  recipient_id: number;
  kind: string;
  actor_id: number;
  article_id: number | null;
  comment_id: number | null;
  endpoint_id: number | null;
  /** The event that made it; null for notices the app makes itself (an endpoint disabled, a moderation decision). */
  event_id: number | null;
  /** The moderation decision it tells of (kind `moderation`). */
  decision_id: number | null;
  created_at: EpochMs;
}

/** How far each user has read their notifications. */
export interface NotificationMarksTable {
  user_id: number;
  read_up_to: number;
}

export interface WebhookEndpointsTable {
  id: Generated<number>;
  owner_id: number;
  url: string;
  event_mask: number;
  secret: string;
  enabled: Generated<number>;
  disabled_reason: string | null;
  created_at: EpochMs;
  /** When a delivery of this endpoint was last claimed; the fair share serves the owner claimed longest ago first. */
  last_claimed_at: EpochMs | null;
}

export interface WebhookDeliveriesTable {
  id: Generated<number>;
  endpoint_id: number;
  event_id: number;
  status: 'pending' | 'delivered' | 'failed';
  attempts: Generated<number>;
  next_attempt_at: EpochMs;
  /** Set while an attempt is on its way (until its lease ends, should the sender die): what counts against the owner's share. */
  leased_until: EpochMs | null;
  last_status: number | null;
  last_latency_ms: number | null;
  last_error: string | null;
  created_at: EpochMs;
  finished_at: EpochMs | null;
}

export const ROLES = ['user', 'moderator', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export interface BlocksTable {
  blocker_id: number;
  blocked_id: number;
  created_at: EpochMs;
}

export interface MutesTable {
  muter_id: number;
  muted_id: number;
  created_at: EpochMs;
}

export const REPORT_TARGETS = ['article', 'comment', 'profile'] as const;
export type ReportTarget = (typeof REPORT_TARGETS)[number];
export const REPORT_STATUSES = ['open', 'resolved', 'dismissed'] as const;
export type ReportStatus = (typeof REPORT_STATUSES)[number];

/** A report on an article, comment or profile, or (reason `appeal`) an appeal of a decision: the moderators' queue. */
export interface ReportsTable {
  id: Generated<number>;
  reporter_id: number;
  target_type: ReportTarget;
  /** The account the report is about: the profile, or the author of the article or comment. */
  subject_id: number;
  article_id: number | null;
  comment_id: number | null;
  /** `<type>:<id>`: one open report per reporter and target (a partial unique index), and the queue's grouping. */
  target_key: string;
  reason: string;
  message: string | null;
  status: Generated<ReportStatus>;
  /** The decision an appeal contests. */
  decision_id: number | null;
  decided_by: number | null;
  decision_note: string | null;
  decided_at: EpochMs | null;
  created_at: EpochMs;
}

/** A decision about a user's account or content, told to them (GET /api/user/moderation) and open to appeal. */
export interface ModerationDecisionsTable {
  id: Generated<number>;
  subject_id: number;
  action: string;
  article_id: number | null;
  comment_id: number | null;
  report_id: number | null;
  reason: string | null;
  until: EpochMs | null;
  appealed_at: EpochMs | null;
  created_at: EpochMs;
}

/** Append-only (triggers refuse UPDATE and DELETE): ids only, so it outlives and names nothing of a purged account. */
export interface AuditLogTable {
  id: Generated<number>;
  /** null: the system (the scheduler, the purge). */
  actor_id: number | null;
  action: string;
  target_type: string;
  target_id: number | null;
  reason: string | null;
  created_at: EpochMs;
}

export interface Database {
  users: UsersTable;
  follows: FollowsTable;
  articles: ArticlesTable;
  article_revisions: ArticleRevisionsTable;
  tags: TagsTable;
  article_tags: ArticleTagsTable;
  favorites: FavoritesTable;
  article_totals: ArticleTotalsTable;
  comments: CommentsTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  event_types: EventTypesTable;
  notifications: NotificationsTable;
  notification_marks: NotificationMarksTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  reserved_identities: ReservedIdentitiesTable;
  blocks: BlocksTable;
  mutes: MutesTable;
  reports: ReportsTable;
  moderation_decisions: ModerationDecisionsTable;
  audit_log: AuditLogTable;
}

/** A database handle or a transaction: every query function takes one as its first argument. */
export type Executor = Kysely<Database>;

export type UserRow = Selectable<UsersTable>;
export type NewUserRow = Insertable<UsersTable>;
