/**
 * The wrapper form `gpugate wait [options] -- CMD ARGS…`: once the GPUs are free, run CMD with
 * the same stdio, pass termination signals on to it, and resolve to its exit status (128 + the
 * signal number when it died by a signal; 127 / 126 when it cannot be found / run, like env(1)).
 *
 * A signal must reach CMD exactly once. Two set-ups:
 * - As PID 1 (a container's entry point) gpugate is CMD's init: CMD runs in a session of its own,
 *   so nothing addressed to gpugate's process group or terminal reaches CMD directly; every
 *   signal gpugate gets is forwarded, and orphans are reaped (orphan-reaper.ts).
 * - Otherwise CMD stays in gpugate's process group (a foreground job keeps its terminal), and the
 *   sender of each signal decides (signal-source.ts): a terminal's Ctrl-C / Ctrl-\ went to the
 *   whole foreground group, and systemd's KillMode=control-group signals
 *   every process of the unit, CMD included; those are not forwarded. Anything else is.
 */

import type * as ChildProcessModule from 'node:child_process';
import { constants } from 'node:os';
import { logfmt } from './logfmt';
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
    const child = spawn(file, args, { stdio: 'inherit', env, detached: asInit });
    const sources = asInit ? null : new SignalSources(env);
    const handlers: Array<[NodeJS.Signals, () => void]> = FORWARDED.map((signal) => {
      const handler = (): void => {
        if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
        const reached = sources === null ? Promise.resolve(null) : sources.reachedGroup(signal, child.pid);
        void reached.then((why) => {
          if (why !== null) logger.info(`not forwarded ${logfmt([['signal', signal], ['reason', why]])}`);
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
