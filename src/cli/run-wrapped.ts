/**
 * The wrapper form `gpugate wait [options] -- CMD ARGS…`: once the GPUs are free, run CMD with
 * the same stdio, pass termination signals on to it, and resolve to its exit status (128 + the
 * signal number when it died by a signal; 127 / 126 when it cannot be found / run, like env(1)).
 *
 * A signal must reach CMD exactly once, so CMD runs in a session (and process group) of its own:
 * nothing addressed to gpugate's process group, session or terminal reaches CMD directly, and
 * gpugate forwards every signal it gets, except one its sender also sent to CMD itself
 * (signal-source.ts: a service manager stopping the unit by signalling each of its processes).
 * CMD therefore has no controlling terminal: a terminal's keys reach gpugate, which forwards
 * Ctrl-C (SIGINT) and Ctrl-\ (SIGQUIT); Ctrl-Z stops gpugate alone.
 * As PID 1 (a container's entry point) gpugate is also CMD's init and reaps orphans
 * (orphan-reaper.ts).
 */

import type * as ChildProcessModule from 'node:child_process';
import { constants } from 'node:os';
import { logEvent } from './logfmt';
import type { Logger } from './logger';

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];

/** Run `argv` and resolve to the status gpugate should exit with. */
export function runWrapped(argv: readonly string[], logger: Logger, env: NodeJS.ProcessEnv): Promise<number> {
  const [file, ...args] = argv;
  if (file === undefined) return Promise.resolve(127);
  // Required here, not at the top: node:child_process is not in Node's start-up snapshot and
  // costs milliseconds to load, which every `check` and every plain `wait` would pay otherwise
  // (and the signal and orphan helpers load the addon and /proc readers).
  const { spawn } = require('node:child_process') as typeof ChildProcessModule;
  const { startOrphanReaper } = require('./orphan-reaper') as typeof import('./orphan-reaper');
  const { SignalSources } = require('./signal-source') as typeof import('./signal-source');
  const asInit = process.pid === 1;
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: 'inherit', env, detached: true });
    const sources = asInit ? null : new SignalSources(env);
    const handlers: Array<[NodeJS.Signals, () => void]> = FORWARDED.map((signal) => {
      const handler = (): void => {
        if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
        const reached = sources === null ? Promise.resolve(null) : sources.reachedChild(signal, child.pid);
        void reached.then((why) => {
          if (why !== null) logger.info(logEvent('not-forwarded', [['signal', signal], ['reason', why]], `not forwarded signal=${signal} reason="${why}"`));
          else if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        });
      };
      process.on(signal, handler);
      return [signal, handler];
    });
    sources?.watch(FORWARDED, logger);
    const stopReaper = asInit && child.pid !== undefined ? startOrphanReaper(() => new Set([child.pid!]), logger) : () => {};
    const cleanup = (): void => {
      stopReaper();
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
