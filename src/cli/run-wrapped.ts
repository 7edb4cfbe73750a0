/**
 * The wrapper form `gpugate wait [options] -- CMD ARGS…`: once the GPUs are free, run CMD with
 * the same stdio, forward termination signals to it, and resolve to its exit status (128 + the
 * signal number when it died by a signal; 127 / 126 when it cannot be found / run, like env(1)).
 */

import type * as ChildProcessModule from 'node:child_process';
import { constants } from 'node:os';
import type { Logger } from './logger';

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];

/** Run `argv` and resolve to the status gpugate should exit with. */
export function runWrapped(argv: readonly string[], logger: Logger, env: NodeJS.ProcessEnv): Promise<number> {
  const [file, ...args] = argv;
  if (file === undefined) return Promise.resolve(127);
  // Required here, not at the top: node:child_process is not in Node's start-up snapshot and
  // costs milliseconds to load, which every `check` and every plain `wait` would pay otherwise.
  const { spawn } = require('node:child_process') as typeof ChildProcessModule;
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: 'inherit', env });
    const handlers: Array<[NodeJS.Signals, () => void]> = FORWARDED.map((signal) => {
      const handler = (): void => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      };
      process.on(signal, handler);
      return [signal, handler];
    });
    const cleanup = (): void => {
      for (const [signal, handler] of handlers) process.removeListener(signal, handler);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      cleanup();
      const notFound = error.code === 'ENOENT';
      logger.error(`cannot run ${JSON.stringify(file)}: ${notFound ? 'command not found' : error.message}`);
      resolve(notFound ? 127 : 126);
    });
    child.once('exit', (code, signal) => {
      cleanup();
      if (code !== null) {
        resolve(code);
        return;
      }
      const number = signal === null ? undefined : constants.signals[signal];
      resolve(128 + (number ?? 0));
    });
  });
}
