import cluster, { type Worker } from 'node:cluster';

// The protocol between a worker and the cluster primary, which keeps the limits' counts for all its workers. A request
// names what it asks for (`op`); one that expects an answer carries an id that the answer repeats, since a worker has
// many in flight at once and one channel for them all. One worker's messages arrive in the order it sent them.
const MESSAGE_TYPE = 'conduit:limits';

interface Request {
  type: typeof MESSAGE_TYPE;
  op: string;
  id?: number;
}

interface Answer {
  type: typeof MESSAGE_TYPE;
  id: number;
  answer: unknown;
}

const isLimitsMessage = (message: unknown): message is { type: typeof MESSAGE_TYPE } =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === MESSAGE_TYPE;

/** What the primary does with one kind of request: its result goes back to the worker when the request has an id. */
// biome-ignore lint/suspicious/noExplicitAny: each handler reads the fields its own workers' side sends.
type Handler = (worker: Worker, request: any) => unknown;

/**
 * In the cluster primary, before it forks: answers the workers' requests of the kinds `handlers` names. Only workers
 * this primary forked can send here.
 */
export function answerWorkers(handlers: Record<string, Handler>): void {
  // A worker that exited meanwhile cannot be answered; its requests are gone with it.
  const ignoreUndelivered = () => {};
  cluster.on('message', (worker, message: unknown) => {
    if (!isLimitsMessage(message)) return;
    const request = message as Request;
    const handle = handlers[request.op];
    if (handle === undefined) return;
    const answer = handle(worker, request);
    if (request.id === undefined || !worker.isConnected()) return;
    worker.send({ type: MESSAGE_TYPE, id: request.id, answer } satisfies Answer, ignoreUndelivered);
  });
}

/**
 * Well above a round trip (about 20 µs, 0.1 ms on a busy machine): only a primary that stopped answering takes this
 * long, and meanwhile requests wait no longer than they would on an unreachable Redis.
 */
const PRIMARY_ANSWER_TIMEOUT_MS = 500;

interface Log {
  warn(details: object, message: string): void;
  info(message: string): void;
}

export interface PrimaryChannel {
  /** Resolves with the primary's answer, or rejects when none comes within PRIMARY_ANSWER_TIMEOUT_MS. */
  ask<T>(op: string, fields: object): Promise<T>;
  /** A request that expects no answer: lost, like the channel, when the primary is gone. */
  tell(op: string, fields: object): void;
  close(): void;
}

/**
 * In a cluster worker: its end of the channel. A request the primary does not answer in time rejects, and the limit
 * that asked lets its request through (fail open, as with Redis): the primary does nothing but supervise and count,
 * so a silent one is stalled or gone (then this worker exits with it), and refusing every request of every worker
 * meanwhile would turn a stuck supervisor into an outage. The worker logs it once until the primary answers again.
 */
export function channelToPrimary(log: Log): PrimaryChannel {
  let lastId = 0;
  const waiting = new Map<number, { settle: (answer: unknown) => void; timer: NodeJS.Timeout }>();
  let failing = false;

  const settle = (id: number, outcome: unknown) => {
    const request = waiting.get(id);
    if (request === undefined) return;
    waiting.delete(id);
    clearTimeout(request.timer);
    if (outcome instanceof Error && !failing) {
      failing = true;
      log.warn({ err: outcome }, 'the cluster primary does not answer: limits are not enforced until it does');
    } else if (!(outcome instanceof Error) && failing) {
      failing = false;
      log.info('the cluster primary answers again: limits are enforced');
    }
    request.settle(outcome);
  };
  const onMessage = (message: unknown) => {
    if (isLimitsMessage(message)) settle((message as Answer).id, (message as Answer).answer);
  };
  process.on('message', onMessage);

  const send = (request: Request, onError: (error: Error) => void) => {
    if (process.send === undefined || !process.connected) onError(new Error('no channel to the cluster primary'));
    else process.send(request, (error: Error | null) => error && onError(error));
  };

  return {
    ask: <T>(op: string, fields: object) =>
      new Promise<T>((resolve, reject) => {
        const id = ++lastId;
        const timer = setTimeout(
          () => settle(id, new Error(`no answer from the cluster primary within ${PRIMARY_ANSWER_TIMEOUT_MS} ms`)),
          PRIMARY_ANSWER_TIMEOUT_MS,
        );
        waiting.set(id, { settle: (outcome) => (outcome instanceof Error ? reject(outcome) : resolve(outcome as T)), timer });
        send({ ...fields, type: MESSAGE_TYPE, op, id }, (error) => settle(id, error));
      }),
    tell: (op, fields) => send({ ...fields, type: MESSAGE_TYPE, op }, () => {}),
    close: () => process.off('message', onMessage),
  };
}
