import { describe, expect, it } from 'vitest';
import { FairTurns } from '../src/fair-turns.js';

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** Work that runs until the test finishes it, each start and end recorded in one log. */
class Works {
  readonly log: string[] = [];
  private readonly gates = new Map<string, () => void>();

  work(name: string) {
    return async () => {
      this.log.push(`start ${name}`);
      await new Promise<void>((resolve) => this.gates.set(name, resolve));
      this.log.push(`end ${name}`);
      return name;
    };
  }

  /** Finishes whichever work is running, one at a time, until none is left. */
  async finishAll(): Promise<void> {
    await settle();
    while (this.gates.size > 0) {
      const [name, finish] = this.gates.entries().next().value!;
      this.gates.delete(name);
      finish();
      await settle();
    }
  }
}

const started = (log: string[]) => log.filter((line) => line.startsWith('start ')).map((line) => line.slice(6));

describe('FairTurns', () => {
  it("serves a bystander after at most one piece of each other client's, however much they queued", async () => {
    const turns = new FairTurns(1, 100, 1000);
    const works = new Works();
    const attackers = ['x', 'y'];
    const runs: Array<Promise<string> | string> = [];
    for (let i = 0; i < 20; i++) for (const attacker of attackers) runs.push(turns.run(attacker, works.work(`${attacker}${i}`)));
    runs.push(turns.run('bystander', works.work('bystander')));
    await works.finishAll();
    await Promise.all(runs);
    // x0 held the slot when the bystander came, y0 and x1 were ahead of it in the rotation: 38 pieces were still to run.
    expect(started(works.log).slice(0, 4)).toEqual(['x0', 'y0', 'x1', 'bystander']);
    const attackersDoneFirst = works.log.slice(0, works.log.indexOf('start bystander')).filter((line) => line.startsWith('end '));
    expect(attackersDoneFirst.length).toBe(1 + attackers.length);
    expect(works.log.filter((line) => line.startsWith('end ')).length).toBe(41);
  });

  it('takes turns client by client, each client in its own order', async () => {
    const turns = new FairTurns(2, 100, 1000);
    const works = new Works();
    const runs = ['a1', 'a2', 'a3', 'a4', 'b1', 'b2', 'c1'].map((name) => turns.run(name[0]!, works.work(name)));
    await works.finishAll();
    expect(await Promise.all(runs)).toEqual(['a1', 'a2', 'a3', 'a4', 'b1', 'b2', 'c1']);
    expect(started(works.log)).toEqual(['a1', 'a2', 'a3', 'b1', 'c1', 'a4', 'b2']);
  });

  it('refuses a client past its share, and anyone past the queue, at once; a finished piece frees its place', async () => {
    const turns = new FairTurns(1, 2, 3);
    const works = new Works();
    const first = [turns.run('a', works.work('a1')), turns.run('a', works.work('a2'))];
    expect(turns.run('a', works.work('a3'))).toBe('client');
    const third = turns.run('b', works.work('b1'));
    expect(turns.run('c', works.work('c1'))).toBe('full');
    await works.finishAll();
    expect(await Promise.all([...first, third])).toEqual(['a1', 'a2', 'b1']);
    const again = turns.run('a', works.work('a4'));
    await works.finishAll();
    expect(await again).toBe('a4');
  });

  it('frees the turn and the place of work that fails', async () => {
    const turns = new FairTurns(1, 1, 10);
    await expect(turns.run('a', () => Promise.reject(new Error('failed')))).rejects.toThrow('failed');
    expect(await turns.run('a', async () => 'next')).toBe('next');
  });
});
