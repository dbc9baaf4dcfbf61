import type { ChildProcess } from 'node:child_process';
import { forkEntry, nextMessage } from './child.js';

export interface Ceiling {
  base: string;
  /** Makes every later answer a JSON body of this many bytes. */
  setBodySize(bytes: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startCeiling(): Promise<Ceiling> {
  const child: ChildProcess = forkEntry(new URL('./ceiling-child.ts', import.meta.url));
  const { port } = await nextMessage<{ port: number }>(child);
  return {
    base: `http://127.0.0.1:${port}`,
    async setBodySize(bytes) {
      const answer = nextMessage<{ bodyBytes: number }>(child);
      child.send({ bodyBytes: bytes });
      await answer;
    },
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.disconnect();
      await exited;
    },
  };
}
