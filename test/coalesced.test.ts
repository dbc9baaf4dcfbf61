import { describe, expect, it } from 'vitest';
import { coalesced } from '../src/db/coalesced.js';

/** A read of `value` that the test finishes by hand, counting how many were started. */
function controlledRead() {
  const state = { value: 0, started: 0, finish: [] as Array<(error?: Error) => void> };
  const read = () => {
    state.started++;
    const seen = state.value;
    return new Promise<number>((resolve, reject) => state.finish.push((error) => (error ? reject(error) : resolve(seen))));
  };
  return { state, read };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('coalesced reads', () => {
  it('starts at once when nothing is running', async () => {
    const { state, read } = controlledRead();
    const shared = coalesced(read);
    const first = shared();
    expect(state.started).toBe(1);
    state.finish[0]!();
    expect(await first).toBe(0);
  });

  it('never answers a caller with a read that started before it asked', async () => {
    const { state, read } = controlledRead();
    const shared = coalesced(read);
    const early = shared();
    // A write lands while the first read runs; whoever asks now must see it.
    state.value = 1;
    const late = shared();
    expect(state.started).toBe(1);
    state.finish[0]!();
    expect(await early).toBe(0);
    await settle();
    expect(state.started).toBe(2);
    state.finish[1]!();
    expect(await late).toBe(1);
  });

  it('answers every caller that came during one read with a single next read', async () => {
    const { state, read } = controlledRead();
    const shared = coalesced(read);
    void shared();
    state.value = 7;
    const waiting = [shared(), shared(), shared()];
    state.finish[0]!();
    await settle();
    expect(state.started).toBe(2);
    state.finish[1]!();
    expect(await Promise.all(waiting)).toEqual([7, 7, 7]);
    // Nothing runs any more: the next caller starts its own read.
    state.value = 8;
    const after = shared();
    expect(state.started).toBe(3);
    state.finish[2]!();
    expect(await after).toBe(8);
  });

  it('with a wait before the first read, lets every caller before it share that read', async () => {
    const { state, read } = controlledRead();
    let open: () => void = () => {};
    const shared = coalesced(read, () => new Promise<void>((resolve) => (open = resolve)));
    const callers = [shared(), shared()];
    state.value = 3;
    callers.push(shared());
    expect(state.started).toBe(0);
    open();
    await settle();
    expect(state.started).toBe(1);
    state.finish[0]!();
    expect(await Promise.all(callers)).toEqual([3, 3, 3]);
  });

  it('passes a failed read to everyone who shared it, and reads afresh for the next caller', async () => {
    const { state, read } = controlledRead();
    const shared = coalesced(read);
    const first = shared();
    const joined = [shared(), shared()];
    state.finish[0]!(new Error('connection lost'));
    await expect(first).rejects.toThrow('connection lost');
    await settle();
    state.finish[1]!(new Error('still down'));
    for (const caller of joined) await expect(caller).rejects.toThrow('still down');
    const recovered = shared();
    expect(state.started).toBe(3);
    state.finish[2]!();
    expect(await recovered).toBe(0);
  });
});
