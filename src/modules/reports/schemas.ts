import { type TSchema, Type } from 'typebox';
import { REPORT_STATUSES } from '../../db/schema.js';
import { Defaulted, INTEGER_ID_MAX, NullableString, PAGE_SIZE_MAX, RequiredText, Timestamp, UrlInteger, Wrapped } from '../../schemas.js';
import { Profile } from '../profiles/schemas.js';

/** A report's message, a resolution's note and an appeal's message. */
export const TEXT_MAX = 2_000;

export const REPORT_REASONS = ['spam', 'harassment', 'illegal', 'other'] as const;
export type ReportReason = (typeof REPORT_REASONS)[number];

const orNull = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const NewReportBody = Wrapped(
  'report',
  Type.Object({
    reason: Type.Enum([...REPORT_REASONS]),
    message: Type.Optional(NullableString({ maxLength: TEXT_MAX, description: 'Optional; blank is stored as null' })),
  }),
);

const Id = UrlInteger({ minimum: 1, maximum: INTEGER_ID_MAX });

const reportFields = {
  id: Type.Integer(),
  reason: Type.Enum([...REPORT_REASONS, 'appeal']),
  message: NullableString(),
  status: Type.Enum([...REPORT_STATUSES]),
  createdAt: Timestamp,
};

/** What the reporter sees of their report: never anything of the moderators' side but its status. */
export const ReportResponse = Wrapped('report', Type.Object(reportFields));

const ArticleMention = Type.Object({ slug: Type.String(), title: Type.String() });

export const Target = Type.Union(
  [
    Type.Object({ type: Type.Literal('article'), slug: Type.String(), title: Type.String(), author: Type.String() }),
    Type.Object({
      type: Type.Literal('comment'),
      id: Type.Integer(),
      body: Type.String(),
      article: ArticleMention,
      author: Type.String(),
    }),
    Type.Object({ type: Type.Literal('profile'), username: Type.String() }),
  ],
  {
    description:
      "What the entry is about: an article or comment (with its author's username) or a profile. An appeal's target " +
      "is what the contested decision was about, or the appellant's profile once that content is gone",
  },
);

export const QUEUE_SORTS = ['newest', 'most-reported'] as const;

export const QueueQuery = Type.Object({
  status: Defaulted(Type.Enum([...REPORT_STATUSES], { default: 'open' })),
  sort: Defaulted(
    Type.Enum([...QUEUE_SORTS], {
      default: 'newest',
      description:
        '`most-reported`: by how many open reports the same target has, then newest; open reports only (422 with ' +
        'another status). Its pages follow the counts as they stand when each page is read',
    }),
  ),
  limit: Defaulted(UrlInteger({ minimum: 1, maximum: PAGE_SIZE_MAX, default: 20 })),
  cursor: Type.Optional(Type.String({ maxLength: 200, description: 'The `nextCursor` of the previous page, in the same order' })),
});

/** A report as its reporter's export keeps it. */
export const FiledReport = Type.Object({
  ...reportFields,
  target: Target,
  resolution: orNull(Type.Object({ note: NullableString(), decidedAt: Timestamp }, { description: 'Once decided' })),
  appeal: orNull(
    Type.Object(
      { decision: Type.Object({ id: Type.Integer(), action: Type.String(), reason: NullableString() }) },
      {
        description:
          "Set on an appeal (`reason` `appeal`, `message` the appellant's): the decision contested. Resolving an " +
          'appeal grants it (undo the decision with its own route), dismissing it lets the decision stand; either way ' +
          'the appellant is told, with the note',
      },
    ),
  ),
});

export const QueueEntry = Type.Object({
  ...FiledReport.properties,
  reporter: Profile,
  reportCount: Type.Integer({
    minimum: 1,
    description:
      'How many reports with this status the target has (an appeal is alone on its decision); in the newest order ' + 'counted up to 1,000',
  }),
});

export const QueueResponse = Type.Object({
  reports: Type.Array(QueueEntry),
  nextCursor: NullableString({ description: 'Where the next page starts; null on the last page' }),
});

export const ReportParams = Type.Object({ id: Id });

export const ResolutionBody = Wrapped(
  'resolution',
  Type.Object({
    note: Type.Optional(RequiredText(TEXT_MAX, "Told to the reporter as the decision's reason; optional")),
  }),
);

export const DecidedReportResponse = Wrapped('report', QueueEntry);

export const Decision = Type.Object({
  id: Type.Integer(),
  action: Type.String({ description: 'What was done: `article.hidden`, `user.suspended`, `report.dismissed`, …' }),
  reason: NullableString(),
  until: NullableString({ format: 'date-time', description: 'When a suspension ends by itself; null otherwise' }),
  createdAt: Timestamp,
  article: orNull(Type.Object({ slug: Type.String(), title: Type.String() }, { description: 'While you can see it' })),
  comment: orNull(Type.Object({ id: Type.Integer() })),
  appeal: orNull(
    Type.Object({
      status: Type.Enum([...REPORT_STATUSES], { description: '`resolved`: granted; `dismissed`: the decision stands' }),
      createdAt: Timestamp,
    }),
  ),
});

export const DecisionListResponse = Type.Object({
  decisions: Type.Array(Decision, { description: 'Newest first' }),
  nextCursor: NullableString({ description: 'Where the next, older page starts; null on the last page' }),
});

export const DecisionParams = Type.Object({ id: Id });

export const AppealBody = Wrapped('appeal', Type.Object({ message: RequiredText(TEXT_MAX) }));

export const DecisionResponse = Wrapped('decision', Decision);
