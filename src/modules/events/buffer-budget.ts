/** What a stream tells the process-wide budget: the bytes waiting in it for its client now, and how to cut it. */
export interface Buffered {
  backlog(): number;
  cut(): void;
}

/**
 * The bytes all the streams of a process hold for clients that read slower than events come, kept under one budget
 * (EVENT_STREAMS_BUFFER_MB): the 4 MiB each stream may hold would otherwise let a thousand idle clients hold 4 GiB.
 * Past it, the streams that hold the most are cut first, until the rest fit; their clients resume with Last-Event-ID.
 */
export class BufferBudget {
  /** Each stream's backlog when it last wrote: it only shrinks after that, as its client reads. */
  private readonly recorded = new Map<Buffered, number>();
  private total = 0;

  constructor(private readonly limitBytes: number) {}

  /** The bytes held now, every stream measured afresh. */
  held(): number {
    this.remeasure();
    return this.total;
  }

  /** `stream` has just written: when the streams hold more than the budget, the largest are cut. */
  charge(stream: Buffered): void {
    const backlog = stream.backlog();
    this.total += backlog - (this.recorded.get(stream) ?? 0);
    this.recorded.set(stream, backlog);
    if (this.total <= this.limitBytes) return;
    // The sizes recorded are stale for the clients that read since: nobody is cut for bytes already sent.
    this.remeasure();
    const largestFirst = [...this.recorded].sort(([, a], [, b]) => b - a);
    for (const [candidate] of largestFirst) {
      if (this.total <= this.limitBytes) return;
      this.forget(candidate);
      candidate.cut();
    }
  }

  forget(stream: Buffered): void {
    this.total -= this.recorded.get(stream) ?? 0;
    this.recorded.delete(stream);
  }

  private remeasure(): void {
    this.total = 0;
    for (const stream of this.recorded.keys()) {
      const backlog = stream.backlog();
      this.recorded.set(stream, backlog);
      this.total += backlog;
    }
  }
}
