import type { FastifyInstance } from 'fastify';

/** One message of a Server-Sent Events stream; a comment line (`: ping`) is one with `comment` set and nothing else. */
export interface SseMessage {
  event?: string;
  id?: string;
  data?: string;
  retry?: number;
  comment?: string;
}

/** A stream opened with fetch: its status and headers, and the messages as they arrive. */
export interface SseStream {
  status: number;
  headers: Headers;
  /** Every message so far, in order. */
  messages: SseMessage[];
  /** The messages with an event id, parsed from their JSON `data`, with their SSE event name. */
  events(): Array<{ name: string; id: string; envelope: any }>;
  /** Resolves once `ready` holds of the messages so far, or rejects after `timeoutMs`. */
  until(ready: (messages: SseMessage[]) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves when the server has ended the stream (or the test closed it). */
  ended: Promise<void>;
  /** The error body of a refused stream. */
  json(): Promise<any>;
  close(): void;
}

/** Parses one message block (the lines between blank lines) as the SSE spec reads it. */
export function parseMessage(block: string): SseMessage {
  const message: SseMessage = {};
  for (const line of block.split('\n')) {
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === '') message.comment = value;
    else if (field === 'data') message.data = message.data === undefined ? value : `${message.data}\n${value}`;
    else if (field === 'event' || field === 'id') message[field] = value;
    else if (field === 'retry') message.retry = Number(value);
  }
  return message;
}

export async function openStream(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const abort = new AbortController();
  const response = await fetch(url, { headers, signal: abort.signal });
  const messages: SseMessage[] = [];
  const waiters = new Set<() => void>();
  const stream: SseStream = {
    status: response.status,
    headers: response.headers,
    messages,
    events: () =>
      messages
        .filter((message) => message.id !== undefined)
        .map((message) => ({ name: message.event ?? 'message', id: message.id!, envelope: JSON.parse(message.data ?? 'null') })),
    until(ready, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!ready(messages)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the stream did not get there within ${timeoutMs} ms; got ${JSON.stringify(messages)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    ended: response.headers.get('content-type')?.startsWith('text/event-stream') ? read(response, messages, waiters) : Promise.resolve(),
    json: () => response.json(),
    close: () => abort.abort(),
  };
  return stream;
}

async function read(response: Response, messages: SseMessage[], waiters: Set<() => void>): Promise<void> {
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for await (const chunk of response.body!) {
      pending += decoder.decode(chunk, { stream: true });
      let end = pending.indexOf('\n\n');
      while (end !== -1) {
        messages.push(parseMessage(pending.slice(0, end)));
        pending = pending.slice(end + 2);
        end = pending.indexOf('\n\n');
      }
      for (const waiter of [...waiters]) waiter();
    }
  } catch {
    // Closed by the test (abort) or by the server: the messages so far stay readable.
  }
}

/**
 * An injected GET's status and text. A live stream (`stream`) is read for a moment: until something with an event id
 * came and then nothing for 250 ms, or at most 300 ms (3 s with `replaying`, a resume from an event id: on PostgreSQL
 * the stream holds back events newer than the oldest transaction open anywhere on the server, so a replay may wait).
 */
export async function injectedText(
  app: FastifyInstance,
  url: string,
  { headers = {}, stream = false, replaying = false }: { headers?: Record<string, string>; stream?: boolean; replaying?: boolean } = {},
): Promise<{ status: number; body: string }> {
  if (!stream) {
    const response = await app.inject({ method: 'GET', url, headers });
    return { status: response.statusCode, body: response.body };
  }
  const response = await app.inject({ method: 'GET', url, headers, payloadAsStream: true });
  const readable = response.stream();
  let body = '';
  let lastChunk = Date.now();
  readable.on('data', (chunk: Buffer) => {
    body += chunk.toString();
    lastChunk = Date.now();
  });
  const started = Date.now();
  while (Date.now() - started < (replaying ? 3000 : 300) && !(body.includes('\nid: ') && Date.now() - lastChunk > 250)) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  readable.destroy();
  return { status: response.statusCode, body };
}
