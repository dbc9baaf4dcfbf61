import { HeldCounts } from './held-counts.js';

/** Why a client's work was not queued: it holds as much as it may, or the queue as much as it may. */
export type TurnRefusal = 'client' | 'full';

/**
 * At most `capacity` pieces of work at a time, the others waiting per client and served round-robin between clients:
 * each turn goes to the next client in the rotation that has work waiting, so work that arrives finds, ahead of it,
 * at most one piece from each other client, however much they sent. Each client holds at most `perClient` pieces
 * (running or waiting), and all of them together at most `heldMax`: a flood from a few clients costs the others one
 * turn per flooding client, not the flood.
 */
export class FairTurns {
  private running = 0;
  private total = 0;
  /** Clients with work waiting, in the order their turns come: a Map keeps insertion order. */
  private readonly waiting = new Map<string, Array<() => void>>();
  /** Pieces each client holds, running or waiting. */
  private readonly held = new HeldCounts();

  constructor(
    private readonly capacity: number,
    private readonly perClient: number,
    private readonly heldMax: number,
  ) {}

  /** `work`'s answer once it has had its turn, or the refusal, at once, when it cannot be queued. */
  run<T>(client: string, work: () => Promise<T>): Promise<T> | TurnRefusal {
    if (!this.held.take(client, this.perClient)) return 'client';
    if (this.total >= this.heldMax) {
      // Taken first so that a client at its share hears 'client' even from a full queue: its own excess, not others'.
      this.held.give(client);
      return 'full';
    }
    this.total++;
    return this.inTurn(client, work);
  }

  private async inTurn<T>(client: string, work: () => Promise<T>): Promise<T> {
    try {
      await this.take(client);
      try {
        return await work();
      } finally {
        this.release();
      }
    } finally {
      this.total--;
      this.held.give(client);
    }
  }

  private async take(client: string): Promise<void> {
    if (this.running < this.capacity) {
      this.running++;
      return;
    }
    await new Promise<void>((start) => {
      const queue = this.waiting.get(client);
      if (queue === undefined) this.waiting.set(client, [start]);
      else queue.push(start);
    });
  }

  /** Hands the slot straight to the next client in the rotation, which goes to the back of it if it has more. */
  private release(): void {
    const next = this.waiting.entries().next();
    if (next.done) {
      this.running--;
      return;
    }
    const [client, queue] = next.value;
    this.waiting.delete(client);
    const start = queue.shift()!;
    if (queue.length > 0) this.waiting.set(client, queue);
    start();
  }
}
