/**
 * The wrapper form `gpugate wait [options] -- CMD ARGS…`: once the GPUs are free, run CMD with
 * the same stdio, forward termination signals to it, and resolve to its exit status (128 + the
 * signal number when it died by a signal; 127 / 126 when it cannot be found / run, like env(1)).
 */

import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Logger } from './logger';

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];

/** Run `argv` and resolve to the status gpugate should exit with. */
export function runWrapped(argv: readonly string[], logger: Logger, env: NodeJS.ProcessEnv): Promise<number> {
  const [file, ...args] = argv;
  if (file === undefined) return Promise.resolve(127);
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
