// Preloaded with `node --import` into a server under test. On SIGUSR2 it raises what no code catches, as a bug in a
// timer or a driver's event handler would: the server needs no route or setting of its own for the tests to do it.
process.on('SIGUSR2', () => {
  setImmediate(() => {
    if (process.env.CRASH_AS === 'rejection') void Promise.reject(new Error('boom from a promise'));
    else throw new Error('boom from a timer');
  });
});
