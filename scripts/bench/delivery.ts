import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type LoadResult, type RequestSource, runLoad, send } from './load.js';

/** The load: what a live site's frontends hold open while its writers write. */
export const DELIVERY_STREAMS = 50;
export const DELIVERY_WRITES_PER_SECOND = 20;
/** After the last write, how long stragglers may take before they count as lost. */
const DRAIN_MS = 3_000;

export interface Latencies {
  /** Events this consumer received, each counted once. */
  received: number;
  p50: number;
  p99: number;
  max: number;
}

/** Outbox-to-delivery latency: from an event's timestamp (its write) to its arrival at each consumer. */
export interface DeliveryResult {
  streams: number;
  writesAsked: number;
  /** Events the writes made (their 2xx answers). */
  events: number;
  /** Across every stream: each stream's copy of each event is one sample. */
  stream: Latencies;
  /** The fewest events any one stream received: equal to `events` when no stream lost any. */
  fewestOnAStream: number;
  webhook: Latencies;
}

const percentile = (sorted: number[], share: number) => sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0;

function summarize(samples: number[], received: number): Latencies {
  const sorted = [...samples].sort((a, b) => a - b);
  return { received, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? 0 };
}

const latencyOf = (message: string, now: number) => {
  const event = JSON.parse(message) as { id: string; timestamp: string };
  return { id: event.id, ms: now - Date.parse(event.timestamp) };
};

/** A webhook receiver on loopback: every POST answered 200 at once, its event's latency noted (retries counted once). */
async function startReceiver() {
  const samples: number[] = [];
  const seen = new Set<string>();
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      const { id, ms } = latencyOf(body, Date.now());
      if (!seen.has(id)) {
        seen.add(id);
        samples.push(ms);
      }
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    result: () => summarize(samples, seen.size),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** One live stream of article.created events, its samples kept; `stop` ends it. */
function openStream(base: string, samples: number[]) {
  const ids = new Set<string>();
  const abort = new AbortController();
  const read = async (body: AsyncIterable<Uint8Array>) => {
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of body) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const data = buffered
          .slice(0, end)
          .split('\n')
          .find((line) => line.startsWith('data: '));
        buffered = buffered.slice(end + 2);
        if (data === undefined) continue;
        const { id, ms } = latencyOf(data.slice(6), Date.now());
        ids.add(id);
        samples.push(ms);
      }
    }
  };
  // Resolves once the stream is open; reading goes on until `stop`.
  const opened = fetch(`${base}/api/events?types=article.created`, { signal: abort.signal }).then((response) => {
    if (response.status !== 200 || response.body === null) throw new Error(`GET /api/events answered ${response.status}`);
    read(response.body as AsyncIterable<Uint8Array>).catch(() => {});
  });
  return {
    opened,
    received: () => ids.size,
    stop: () => abort.abort(),
  };
}

/**
 * DELIVERY_STREAMS live streams and a webhook endpoint per author open, then DELIVERY_WRITES_PER_SECOND article
 * writes by those authors for `seconds`: how long each event took from its write to every consumer.
 */
export async function measureDelivery(
  base: string,
  writes: RequestSource,
  authors: readonly string[],
  seconds: number,
): Promise<{ writes: LoadResult; delivery: DeliveryResult }> {
  const receiver = await startReceiver();
  const streamSamples: number[] = [];
  const streams = Array.from({ length: DELIVERY_STREAMS }, () => openStream(base, streamSamples));
  try {
    for (const token of authors) {
      const added = await send(base, {
        method: 'POST',
        path: '/api/webhooks',
        token,
        body: { webhook: { url: receiver.url, events: ['article.created'] } },
      });
      if (added.status !== 201) throw new Error(`POST /api/webhooks answered ${added.status}: ${added.body.slice(0, 300)}`);
    }
    // Every stream open before the first write, so that each should see every event.
    await Promise.all(streams.map((stream) => stream.opened));
    const load = await runLoad(base, writes, { seconds, rate: DELIVERY_WRITES_PER_SECOND });
    await new Promise((resolve) => setTimeout(resolve, DRAIN_MS));
    const events = load.requests - load.non2xx;
    const perStream = streams.map((stream) => stream.received());
    return {
      writes: load,
      delivery: {
        streams: DELIVERY_STREAMS,
        writesAsked: DELIVERY_WRITES_PER_SECOND,
        events,
        stream: summarize(
          streamSamples,
          perStream.reduce((sum, n) => sum + n, 0),
        ),
        fewestOnAStream: Math.min(...perStream),
        webhook: receiver.result(),
      },
    };
  } finally {
    for (const stream of streams) stream.stop();
    await receiver.close();
  }
}
