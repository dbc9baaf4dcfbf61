import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The ceiling: the fastest a Node.js HTTP server on this machine answers the same requests with a body of the same
 * size, with no routing, validation, database or serialisation. The parent sets the size before each scenario.
 */
const JSON_FRAME = '{"padding":""}';

/** A valid JSON document of exactly `bytes` bytes (at least the frame's). */
const jsonOfSize = (bytes: number) =>
  Buffer.from(bytes > JSON_FRAME.length ? `{"padding":"${'x'.repeat(bytes - JSON_FRAME.length)}"}` : JSON_FRAME);

let body = jsonOfSize(0);

const server = http.createServer((request, response) => {
  // A request body (login, create) is read in full, as the real server must before it can answer.
  request.resume();
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
    response.end(body);
  });
});
// The real server's default, so that neither closes kept-alive connections during a run.
server.keepAliveTimeout = 72_000;

process.on('message', (message: { bodyBytes: number }) => {
  body = jsonOfSize(message.bodyBytes);
  process.send!({ bodyBytes: body.length });
});
// The bench is gone (finished or crashed): nothing left to serve.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
