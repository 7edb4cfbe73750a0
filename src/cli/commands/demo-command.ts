/**
 * `gpugate demo`: the restart race on the bundled simulated 8× RTX PRO 6000 host, no GPU
 * needed. It starts a simulated host (src/simulator/sim-host.ts: the scenario anchored to now in a
 * temporary folder, one real orphaned "engine worker" as the holder of GPU 6) and runs exactly
 * `gpugate wait --min-free 0.9 --stable 2s` in this process against it; the worker exits partway
 * through, as a restart would find it gone, and the simulated memory drains. It shows the wait's log as a person at a terminal sees it (compact
 * lines, at most 80 columns, coloured on a terminal unless NO_COLOR is set), then a short summary:
 * what was held and by whom, how long the wait took, and what the unit should contain. The host's
 * worker and folder are removed on every exit path.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from '../cli-error';
import type { CommandContext } from '../command-context';
import { demoScenario, DEMO_WORKER_EXIT_MS, DEMO_WORKER_GPU, DEMO_WORKER_TITLE } from '../demo-scenario';
import { ExitCode, exitCodeForSignal, type InterruptSignal } from '../exit-codes';
import { INTERRUPT_SIGNALS } from '../interrupt-watch';
import { PACKAGE_ROOT } from '../../package-root';
import { colourEnabled, paint, terminalWidth, wrapLine } from '../terminal-style';
import { formatBytes, formatDuration } from '../../units';

/** The wait the demo runs, as a user would type it. */
export const DEMO_WAIT_ARGS = ['wait', '--min-free', '0.9', '--stable', '2s'];

/** Environment variables that would narrow the simulated GPUs; the demo watches all eight. */
const SELECTION_VARIABLES = ['NVIDIA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES', 'SLURM_JOB_GPUS', 'CUDA_DEVICE_ORDER'];

/** The drop-in the package ships: the demo prints its settings, so the two never disagree. */
const DROP_IN = join(PACKAGE_ROOT, 'contrib', 'systemd', 'gpugate-wait.conf');

/** The drop-in's sections and settings (comments left out), long lines continued systemd's way. */
function dropInLines(width: number): string {
  let text: string;
  try {
    text = readFileSync(DROP_IN, 'utf8');
  } catch {
    return `  (see contrib/systemd/gpugate-wait.conf)\n`;
  }
  const lines = text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
  return lines.map((line, i) => {
    const blank = i > 0 && line.startsWith('[') ? '\n' : '';
    const equals = line.indexOf('=');
    // A backslash at the end of a line continues it (systemd.syntax); continuation lines align after "=".
    return `${blank}${wrapLine(`  ${line}`, width - 2, ' '.repeat(equals + 3)).replace(/\n/g, ' \\\n')}`;
  }).join('\n') + '\n';
}

/** The demo never writes wider than this, whatever the terminal. */
const DEMO_WIDTH = 80;

/** The parts of the wait's --json document the summary reads. */
interface WaitDocument {
  elapsedMs: number;
  polls: number;
  gpus: Array<{ index: number; totalBytes: number | null; neededFreeBytes: number | null }>;
}

/** Run `gpugate demo`. */
export async function runDemo(context: CommandContext): Promise<number> {
  const out = context.stdout;
  const colour = colourEnabled(process.stdout, context.env);
  const bold = (text: string): string => paint(colour, text, 'bold');
  const { SimulatedHost } = require('../../simulator/sim-host') as typeof import('../../simulator/sim-host');
  const { unusedPids } = require('../../simulator/sim-holder') as typeof import('../../simulator/sim-holder');
  const { SimLibraryNotFoundError } = require('../../simulator/sim-library') as typeof import('../../simulator/sim-library');
  let host: import('../../simulator/sim-host').SimulatedHost | null = null;
  let waiting = false;
  /** A signal that came during the wait: the demo ends with it once the wait has returned. */
  let interruptedBy: InterruptSignal | null = null;
  const cleanup = (): void => {
    host?.stop();
  };
  // SIGINT/SIGTERM/SIGHUP at any moment, from the start of the simulated host on. During the wait
  // (which reports its last state itself) it is noted, so a signal just before or after the
  // wait's own handlers still ends the demo; outside it: clean up and leave at once.
  const onSignal = (signal: InterruptSignal): void => {
    if (waiting) {
      interruptedBy ??= signal;
      return;
    }
    cleanup();
    process.exit(exitCodeForSignal(signal));
  };
  for (const signal of INTERRUPT_SIGNALS) process.on(signal, onSignal);
  process.on('exit', cleanup);
  try {
    const scenario = demoScenario(unusedPids(8));
    try {
      host = SimulatedHost.start({
        scenario,
        folderPrefix: 'gpugate-demo-',
        fileName: 'restart-race.json',
        onHolderExit: (holder) => {
          out.write(`\n${paint(colour, `(demo) the orphaned worker ${holder.pid} exits now; its memory drains next`, 'magenta')}\n\n`);
        },
      });
    } catch (error) {
      if (error instanceof SimLibraryNotFoundError) throw new CliError(`gpugate demo needs the simulator library: ${error.message}`, ExitCode.unavailable, 'unavailable');
      throw error;
    }
    const simLibrary = host.libraryPath;
    const worker = host.holders[0]!;
    const firstDevice = (scenario as { devices?: Array<{ memory?: { usedBytes?: number } }> }).devices?.[0];
    const held = `~${formatBytes(firstDevice?.memory?.usedBytes ?? 0)}`;

    out.write(`${bold('gpugate demo')}: a vLLM service on an 8x RTX PRO 6000 host just crashed, and
systemd is restarting it.
  - The crashed attempt still holds ${held} on every GPU. Seven of its workers
    are already gone; the driver is still releasing their memory.
  - The eighth, pid ${worker.pid} "${DEMO_WORKER_TITLE}", is a real process here: orphaned
    (its parent died) and still holding GPU ${DEMO_WORKER_GPU}. It exits after ${DEMO_WORKER_EXIT_MS / 1000} s.
  - vLLM at --gpu-memory-utilization 0.9 fails unless 90% of each GPU is free,
    and aborts if free memory grows while it starts: the restart must wait
    until memory is free AND stable.

${paint(colour, `$ gpugate ${DEMO_WAIT_ARGS.join(' ')}`, 'bold', 'cyan')}   (on the simulated host)

`);
    const env: NodeJS.ProcessEnv = { ...context.env, GPUGATE_SIM_SCENARIO: host.scenarioPath };
    for (const name of SELECTION_VARIABLES) delete env[name];
    // The simulator reads the scenario path (and any clock override) from this process's
    // environment at nvmlInit; the host's own startedAt must be the clock.
    process.env.GPUGATE_SIM_SCENARIO = host.scenarioPath;
    delete process.env.GPUGATE_SIM_STARTED_AT;
    const { main } = require('../main') as typeof import('../main');
    // The wait's own log, as a person at a terminal sees it (compact, at most 80 columns); its
    // --json document feeds the summary.
    let document = '';
    waiting = true;
    const code = await main([...DEMO_WAIT_ARGS, '--library', simLibrary, '--json'], env, {
      terminal: true,
      width: Math.min(DEMO_WIDTH, terminalWidth(process.stderr)),
      colour: colourEnabled(process.stderr, context.env),
      stdout: { write: (text: string) => { document += text; } },
    });
    waiting = false;
    if (interruptedBy !== null) return exitCodeForSignal(interruptedBy);
    out.write(`\n${summary(code, parseDocument(document), held, worker.pid, colour)}`);
    return code;
  } finally {
    cleanup();
    process.removeListener('exit', cleanup);
    for (const signal of INTERRUPT_SIGNALS) process.removeListener(signal, onSignal);
  }
}

function parseDocument(text: string): WaitDocument | null {
  try {
    return JSON.parse(text) as WaitDocument;
  } catch {
    return null;
  }
}

/** What happened, in a few lines: who held what, how long the wait took, and what the unit needs. */
function summary(code: number, document: WaitDocument | null, held: string, workerPid: number, colour: boolean): string {
  const label = (text: string): string => paint(colour, text.padEnd(9), 'bold');
  const gpu = document?.gpus[0];
  const need = gpu?.neededFreeBytes === null || gpu?.neededFreeBytes === undefined ? '90%' : formatBytes(gpu.neededFreeBytes);
  const total = gpu?.totalBytes === null || gpu?.totalBytes === undefined ? '' : ` (90% of ${formatBytes(gpu.totalBytes)})`;
  const lines = [
    paint(colour, 'Summary', 'bold'),
    `  ${label('Held')}${held} on each of 8 GPUs by the crashed attempt: 7 workers`,
    `  ${''.padEnd(9)}already gone (the driver releasing their memory), and on GPU ${DEMO_WORKER_GPU}`,
    `  ${''.padEnd(9)}pid ${workerPid} ${DEMO_WORKER_TITLE}, a live orphan, until it exited at ${DEMO_WORKER_EXIT_MS / 1000} s.`,
  ];
  if (document !== null) {
    lines.push(
      `  ${label('Waited')}${formatDuration(document.elapsedMs)} and ${document.polls} polls, until every GPU had ${need} free${total}`,
      `  ${''.padEnd(9)}and its memory had stayed steady for 2 s.`,
    );
  }
  if (code === ExitCode.ok) {
    lines.push(`  ${label('Result')}${paint(colour, 'exit 0', 'green', 'bold')}: this is when systemd would start vLLM.`, '',
      'Put the same guard in front of your service (contrib/systemd/ has a full',
      'unit and a drop-in):', '', dropInLines(DEMO_WIDTH));
  } else {
    lines.push(`  ${label('Result')}${paint(colour, `exit ${code}`, 'red', 'bold')}: gpugate wait did not see the GPUs free and stable.`, '');
  }
  return lines.join('\n');
}
