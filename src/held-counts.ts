/**
 * What each key holds, up to a cap per key; a key leaves the map with the last it held, so the map holds no more keys
 * than holdings, however many keys come and go.
 */
export class HeldCounts {
  private readonly held = new Map<string, number>();

  take(key: string, max: number): boolean {
    const count = this.held.get(key) ?? 0;
    if (count >= max) return false;
    this.held.set(key, count + 1);
    return true;
  }

  give(key: string): void {
    const count = (this.held.get(key) ?? 1) - 1;
    if (count === 0) this.held.delete(key);
    else this.held.set(key, count);
  }
}
