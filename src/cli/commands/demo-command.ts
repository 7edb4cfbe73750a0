/**
 * `gpugate demo`: the restart race on the bundled simulated 8× RTX PRO 6000 host, no GPU
 * needed. It starts a simulated host (src/sim-host.ts: the scenario anchored to now in a
 * temporary folder, one real orphaned "engine worker" as the holder of GPU 6) and runs exactly
 * `gpugate wait --min-free 0.9 --stable 2s` in this process against it; the worker exits partway
 * through, as a restart would find it gone, and the simulated memory drains. The host's worker
 * and folder are removed on every exit path.
 */

import { CliError } from '../cli-error';
import type { CommandContext } from '../command-context';
import { demoScenario, DEMO_WORKER_EXIT_MS, DEMO_WORKER_GPU, DEMO_WORKER_TITLE } from '../demo-scenario';
import { ExitCode } from '../exit-codes';

/** The wait the demo runs, as a user would type it. */
export const DEMO_WAIT_ARGS = ['wait', '--min-free', '0.9', '--stable', '2s'];

/** Environment variables that would narrow the simulated GPUs; the demo watches all eight. */
const SELECTION_VARIABLES = ['NVIDIA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES', 'SLURM_JOB_GPUS', 'CUDA_DEVICE_ORDER'];

const SYSTEMD_LINES = `Put the same guard in front of your service (contrib/systemd/ has a full unit and a drop-in):

  [Unit]
  StartLimitIntervalSec=30min
  StartLimitBurst=6

  [Service]
  NotifyAccess=exec
  ExecStartPre=gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify
  ExecStopPost=-gpugate wait --timeout 100s
  TimeoutStartSec=300
`;

/** Run `gpugate demo`. */
export async function runDemo(context: CommandContext): Promise<number> {
  const out = context.stdout;
  const { SimulatedHost } = require('../../sim-host') as typeof import('../../sim-host');
  const { unusedPids } = require('../../sim-holder') as typeof import('../../sim-holder');
  const { SimLibraryNotFoundError } = require('../../sim-library') as typeof import('../../sim-library');
  let host: import('../../sim-host').SimulatedHost | null = null;
  let waiting = false;
  const cleanup = (): void => {
    host?.stop();
  };
  // SIGINT/SIGTERM outside the wait (which handles them itself): clean up and leave.
  const onSignal = (signal: NodeJS.Signals): void => {
    if (waiting) return;
    cleanup();
    process.exit(signal === 'SIGINT' ? ExitCode.sigint : ExitCode.sigterm);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', cleanup);
  try {
    try {
      host = SimulatedHost.start({
        scenario: demoScenario(unusedPids(8)),
        folderPrefix: 'gpugate-demo-',
        fileName: 'restart-race.json',
        onHolderExit: (holder) => {
          out.write(`\n(demo) the orphaned worker ${holder.pid} exits now; its memory drains over the next seconds\n\n`);
        },
      });
    } catch (error) {
      if (error instanceof SimLibraryNotFoundError) throw new CliError(`gpugate demo needs the simulator library: ${error.message}`, ExitCode.unavailable, 'unavailable');
      throw error;
    }
    const simLibrary = host.libraryPath;
    const worker = host.holders[0]!;

    out.write(`gpugate demo: a vLLM service on an 8x RTX PRO 6000 host just crashed and systemd is restarting it.
  - The crashed attempt still holds ~92 GiB on every GPU. Seven of its workers are already gone;
    the driver is still releasing their memory.
  - The eighth, pid ${worker.pid} "${DEMO_WORKER_TITLE}", is a real process here: orphaned (its parent
    died, it was reparented) and still holding GPU ${DEMO_WORKER_GPU}. It exits after ${DEMO_WORKER_EXIT_MS / 1000} s.
  - vLLM at --gpu-memory-utilization 0.9 fails unless 90% of each GPU is free, and aborts if free
    memory grows while it starts, so the restart must wait until memory is free AND stable.

$ gpugate ${DEMO_WAIT_ARGS.join(' ')}     (on the simulated host: GPUGATE_NVML_LIBRARY=${simLibrary})

`);
    const env: NodeJS.ProcessEnv = { ...context.env, GPUGATE_SIM_SCENARIO: host.scenarioPath };
    for (const name of SELECTION_VARIABLES) delete env[name];
    // The simulator reads the scenario path (and any clock override) from this process's
    // environment at nvmlInit; the host's own startedAt must be the clock.
    process.env.GPUGATE_SIM_SCENARIO = host.scenarioPath;
    delete process.env.GPUGATE_SIM_STARTED_AT;
    const { main } = require('../main') as typeof import('../main');
    waiting = true;
    const code = await main([...DEMO_WAIT_ARGS, '--library', simLibrary], env);
    waiting = false;
    if (code === ExitCode.ok) {
      out.write(`\nThe GPUs are free and stable: this is when systemd would start vLLM (exit 0).\n\n${SYSTEMD_LINES}`);
    } else {
      out.write(`\ngpugate wait ended with exit ${code}.\n`);
    }
    return code;
  } finally {
    cleanup();
    process.removeListener('exit', cleanup);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}
