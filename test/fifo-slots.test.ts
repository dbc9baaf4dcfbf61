import { describe, expect, it } from 'vitest';
import { FifoSlots } from '../src/fifo-slots.js';

/** A piece of work that runs until its `finish` is called, recording when it starts. */
function gatedWork(started: string[], name: string) {
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => (finish = resolve));
  const work = async () => {
    started.push(name);
    await gate;
    return name;
  };
  return { work, finish: () => finish() };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('FifoSlots', () => {
  it('runs at most `capacity` at once and starts the waiters in arrival order', async () => {
    const slots = new FifoSlots(2);
    const started: string[] = [];
    const works = ['a', 'b', 'c', 'd'].map((name) => gatedWork(started, name));
    const results = works.map(({ work }) => slots.run(work));
    await settle();
    expect(started).toEqual(['a', 'b']);
    works[1]!.finish();
    await settle();
    expect(started).toEqual(['a', 'b', 'c']);
    works[0]!.finish();
    works[2]!.finish();
    works[3]!.finish();
    expect(await Promise.all(results)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('hands a released slot to the oldest waiter, not to a newcomer', async () => {
    const slots = new FifoSlots(1);
    const holders: string[] = [];
    await slots.take();
    const waiter = slots.take().then(() => holders.push('waiter'));
    await settle();
    // The newcomer asks in the same turn as the release, before the woken waiter has run.
    slots.release();
    const newcomer = slots.take().then(() => holders.push('newcomer'));
    await settle();
    expect(holders).toEqual(['waiter']);
    slots.release();
    await Promise.all([waiter, newcomer]);
    expect(holders).toEqual(['waiter', 'newcomer']);
  });

  it('frees the slot when the work fails', async () => {
    const slots = new FifoSlots(1);
    await expect(slots.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await slots.run(async () => 'next')).toBe('next');
  });
});
