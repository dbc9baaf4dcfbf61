/**
 * At most `capacity` holders at a time, the rest served first come, first served. A release hands its slot
 * straight to the next waiter, waking that one alone: nobody can overtake the queue, and a queue of 50 costs
 * one wake-up per release, not 50.
 */
export class FifoSlots {
  private busy = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly capacity: number) {}

  get holders(): number {
    return this.busy;
  }

  get queued(): number {
    return this.waiting.length;
  }

  async take(): Promise<void> {
    if (this.busy < this.capacity) {
      this.busy++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next === undefined) this.busy--;
    else next();
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.take();
    try {
      return await work();
    } finally {
      this.release();
    }
  }
}
