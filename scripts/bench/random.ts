/**
 * Seeded randomness for the bench data. Math.random cannot be seeded, and the same seed must give the same
 * rows on every run and machine, so that figures from two runs describe the same database.
 */

const rotateLeft = (value: number, bits: number) => (value << bits) | (value >>> (32 - bits));

/** xoshiro128**: 128 bits of state, fast in 32-bit integer arithmetic, good enough for test data. */
export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** Each `stream` of one seed is an independent sequence, so generating one table never shifts another's values. */
  constructor(seed: number, stream = 0) {
    // splitmix32 spreads a small seed over the whole state; an all-zero state would stay zero forever.
    let state = (Math.imul(seed, 0x9e3779b1) ^ Math.imul(stream + 1, 0x85ebca77)) >>> 0;
    const next = () => {
      state = (state + 0x9e3779b9) >>> 0;
      let z = state;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
  }

  /** A float in [0, 1). */
  next(): number {
    const result = Math.imul(rotateLeft(Math.imul(this.b, 5), 7), 9) >>> 0;
    const shifted = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= shifted;
    this.d = rotateLeft(this.d, 11);
    return result / 4_294_967_296;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** An integer in [from, to]. */
  between(from: number, to: number): number {
    return from + this.below(to - from + 1);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.below(items.length)]!;
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  /** 0..n-1 in random order (Fisher-Yates). */
  permutation(n: number): Int32Array {
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.below(i + 1);
      const kept = order[i]!;
      order[i] = order[j]!;
      order[j] = kept;
    }
    return order;
  }
}

/**
 * Ranks 0..n-1 drawn with probability proportional to 1 / (rank + 1) (Zipf's law): a handful of very popular
 * items and a long tail, as with real authors, tags and articles. Drawing is a binary search in the cumulative
 * weights, so a million items cost 8 MB and about 20 comparisons per draw.
 */
export class Zipf {
  private readonly cumulative: Float64Array;

  constructor(n: number) {
    this.cumulative = new Float64Array(n);
    let total = 0;
    for (let rank = 0; rank < n; rank++) this.cumulative[rank] = total += 1 / (rank + 1);
  }

  draw(random: Random): number {
    const weights = this.cumulative;
    const target = random.next() * weights[weights.length - 1]!;
    let low = 0;
    let high = weights.length - 1;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (weights[middle]! <= target) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}
