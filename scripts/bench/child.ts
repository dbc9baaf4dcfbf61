import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Starts a TypeScript entry of the bench in a process of its own, with an IPC channel. The ceiling server and the
 * argon2 baseline must not share the bench's event loop or CPU accounting with the load generator.
 */
export function forkEntry(entry: URL, args: string[] = []): ChildProcess {
  return fork(fileURLToPath(entry), args, {
    execArgv: ['--import', import.meta.resolve('tsx')],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** The child's next IPC message; fails if it exits first. */
export function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => {
      child.off('message', onMessage);
      reject(new Error(`child process exited (${code}) before answering`));
    };
    const onMessage = (message: unknown) => {
      child.off('exit', onExit);
      resolve(message as T);
    };
    child.once('message', onMessage);
    child.once('exit', onExit);
  });
}
