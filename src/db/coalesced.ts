/**
 * Shares one read among the callers that want it at the same time, without handing any of them an answer older
 * than its call: a caller joins only a read that has not started yet, the one that starts as soon as the read
 * under way ends. A read starts after every caller it answers has asked, so each sees every write committed
 * before it asked, as if it had read alone; under a burst, one lookup answers all the callers that came while
 * the previous one was running. A read that nothing is running before starts at once, or after
 * `beforeFirstRead` when given: a synchronous read (SQLite's) is over before anyone else could join it, so it is
 * made to wait for others instead.
 */
export function coalesced<T>(read: () => Promise<T>, beforeFirstRead?: () => Promise<void>): () => Promise<T> {
  /** Settles when the read under way does, whatever its outcome; undefined when none is. */
  let underWay: Promise<void> | undefined;
  /** The read that starts when the one under way ends; callers join it until it starts. */
  let next: Promise<T> | undefined;

  const start = (): Promise<T> => {
    const result = read();
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    underWay = settled;
    // Registered before any caller can chain `next` on it, so this runs first and `next` then starts afresh.
    void settled.then(() => {
      if (underWay === settled) underWay = undefined;
    });
    return result;
  };

  return () => {
    if (next !== undefined) return next;
    const startAfter = underWay ?? beforeFirstRead?.();
    if (startAfter === undefined) return start();
    next = startAfter.then(() => {
      next = undefined;
      return start();
    });
    return next;
  };
}
