import type { FastifyInstance } from 'fastify';

/**
 * Runs `purgeBatch` every `intervalMs` until it deletes fewer than `batch` rows: a backlog goes in bounded steps, so
 * no purge holds a long lock or a large transaction. A failure is logged and retried at the next interval.
 */
export function schedulePurge(
  app: FastifyInstance,
  what: string,
  intervalMs: number,
  batch: number,
  purgeBatch: (limit: number) => Promise<number>,
): void {
  const purge = async () => {
    try {
      let deleted: number;
      do deleted = await purgeBatch(batch);
      while (deleted === batch);
    } catch (error) {
      app.log.warn({ err: error }, `could not purge ${what}`);
    }
  };
  // unref: the timer alone never keeps a process alive.
  const timer = setInterval(purge, intervalMs).unref();
  app.addHook('onClose', async () => clearInterval(timer));
}
