import type { FastifyInstance } from 'fastify';

/**
 * Once the server is closing, every answer says `Connection: close`, so the client lets go of a kept-alive
 * connection as soon as its request is done. Fastify closes only the connections idle when the shutdown starts:
 * one busy then would otherwise stay open, idle, until the keep-alive timeout (72 s), holding the process past
 * its grace period.
 */
export function installShutdownDraining(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
}
