/**
 * `gpugate sim`: start a simulated GPU host (src/simulator/sim-host.ts) for the user's own NVML tools and
 * keep it until SIGINT/SIGTERM. It checks the scenario through the simulator once (so a bad file
 * fails here, with its FILE:LINE:COL), prints `export` lines for a shell to evaluate (stdout) and
 * what it started (the log), then waits; on the signal it ends the holders and removes the folder.
 */

import * as path from 'node:path';
import { PACKAGE_ROOT } from '../../package-root';
import { CliError } from '../cli-error';
import { stringFlag, type CommandContext } from '../command-context';
import { ExitCode, exitCodeForSignal, type InterruptSignal } from '../exit-codes';
import { INTERRUPT_SIGNALS } from '../interrupt-watch';
import { logEvent } from '../logfmt';

/** Parse --started-at: "now", Unix milliseconds, or an ISO 8601 UTC time. */
function startedAtFlag(text: string | undefined): number {
  if (text === undefined || text === 'now') return Date.now();
  if (/^\d{1,15}$/.test(text)) return Number(text);
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(text) && !Number.isNaN(Date.parse(text))) return Date.parse(text);
  throw new CliError(`gpugate sim: --started-at ${JSON.stringify(text)}: expected now, Unix milliseconds or an ISO 8601 UTC time like 2026-12-01T09:00:00Z (see gpugate sim --help)`, ExitCode.usage, 'usage-error');
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Run `gpugate sim`. */
export async function runSim(context: CommandContext): Promise<number> {
  const { SimulatedHost } = require('../../simulator/sim-host') as typeof import('../../simulator/sim-host');
  const { SimLibraryNotFoundError } = require('../../simulator/sim-library') as typeof import('../../simulator/sim-library');
  const scenario = stringFlag(context.values, 'scenario') ?? path.join(PACKAGE_ROOT, 'scenarios', 'restart-race.json');
  const startedAt = startedAtFlag(stringFlag(context.values, 'started-at'));
  // Listening from before the host exists: a signal at any moment, its first one included, stops
  // it (SIGHUP too, which would otherwise kill the process and leave the folder behind).
  const handlers: Array<[InterruptSignal, () => void]> = [];
  const stopped = new Promise<InterruptSignal>((resolve) => {
    for (const signal of INTERRUPT_SIGNALS) {
      const handler = (): void => resolve(signal);
      handlers.push([signal, handler]);
      process.on(signal, handler);
    }
  });
  const stopListening = (): void => {
    for (const [signal, handler] of handlers) process.removeListener(signal, handler);
  };
  let host: import('../../simulator/sim-host').SimulatedHost;
  try {
    host = SimulatedHost.start({
      scenario,
      startedAt,
      folderPrefix: 'gpugate-simhost-',
      onHolderExit: (holder) => context.logger.info(logEvent('holder-exited', [['pid', holder.pid], ['comm', holder.comm], ['at_ms', holder.exitAtMs]], `holder exited pid=${holder.pid} comm=${holder.comm} at_ms=${holder.exitAtMs}`)),
    });
  } catch (error) {
    stopListening();
    if (error instanceof SimLibraryNotFoundError) throw new CliError(`gpugate sim: ${error.message}`, ExitCode.unavailable, 'unavailable');
    throw new CliError(`gpugate sim: ${error instanceof Error ? error.message : String(error)}`, ExitCode.usage, 'usage-error');
  }
  // A listener alone does not keep Node running: the interval does, until the signal.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  try {
    const count = await deviceCount(host.libraryPath, host.scenarioPath, scenario);
    const env = host.env({});
    // The host's startedAt is the anchor: a GPUGATE_SIM_STARTED_AT left in the shell would override it.
    context.stdout.write(
      'unset GPUGATE_SIM_STARTED_AT\n' +
        `export GPUGATE_SIM_SCENARIO=${shellQuote(env['GPUGATE_SIM_SCENARIO']!)}\n` +
        `export GPUGATE_NVML_LIBRARY=${shellQuote(env['GPUGATE_NVML_LIBRARY']!)}\n` +
        `export LD_LIBRARY_PATH=${shellQuote(env['LD_LIBRARY_PATH']!)}\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n`,
    );
    const holders = host.holders.map((h) => `${h.pid}/${h.comm}${h.exitAtMs === null ? '' : `(exits at ${h.exitAtMs}ms)`}`).join(',');
    const running: Array<[string, string | number]> = [['gpus', count], ['profile', host.profile.name], ['started_at', new Date(host.startedAt).toISOString()], ['holders', holders === '' ? '-' : holders], ['folder', host.folder]];
    context.logger.notice(logEvent('sim-running', [...running, ['msg', 'SIGINT, SIGTERM or SIGHUP stops it']],
      `simulated host running ${running.map(([key, value]) => `${key}=${value}`).join(' ')}; SIGINT, SIGTERM or SIGHUP stops it`));
    const signal = await stopped;
    context.logger.notice(logEvent('sim-stopped', [['signal', signal]], `simulated host stopped by ${signal}`));
    return exitCodeForSignal(signal);
  } finally {
    clearInterval(keepAlive);
    stopListening();
    host.stop();
  }
}

/** Reads the host once through the simulator, so a scenario it rejects fails now, naming the file. */
async function deviceCount(libraryPath: string, scenarioPath: string, source: string): Promise<number> {
  const { openNvml } = require('../../nvml/session') as typeof import('../../nvml/session');
  const previous = process.env['GPUGATE_SIM_SCENARIO'];
  process.env['GPUGATE_SIM_SCENARIO'] = scenarioPath;
  delete process.env['GPUGATE_SIM_STARTED_AT'];  // the host's own anchor applies
  try {
    const session = await openNvml({ libraryPath });
    try {
      return (await session.snapshot()).devices.length;
    } finally {
      await session.close();
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const simulator = /\(simulator: (.*)\)$/.exec(message)?.[1] ?? message;
    throw new CliError(`gpugate sim: the simulator rejected ${source} (as written with startedAt and holder pids filled in): ${simulator}`, ExitCode.usage, 'usage-error');
  } finally {
    if (previous === undefined) delete process.env['GPUGATE_SIM_SCENARIO'];
    else process.env['GPUGATE_SIM_SCENARIO'] = previous;
  }
}
