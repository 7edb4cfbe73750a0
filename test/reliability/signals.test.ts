/**
 * SIGTERM at every point of `gpugate wait`: while NVML is still opening (before the first
 * poll), in the middle of a slow poll (a delayMs fault), and while an NVML call hangs. Each time
 * the command exits 143 within about a second, printing the last known state when there is one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { cliEnv, startCli, type CliProcess } from '../helpers/cli';
import { simDevice, writeScenario } from '../helpers/sim';
import { InterruptWatch } from '../../src/cli/interrupt-watch';
import { parseDuration } from '../../src/units';
import type { SimFault } from './helpers/fault-scenario';
import { logText } from '../helpers/log-lines';
import { mapsHereOrInChild } from '../helpers/processes';

const GiB = 1024 ** 3;
/** "Within a second", with room for a loaded 2-core machine. */
const EXIT_BOUND_MS = 4000;

/** One GPU that stays busy (50 GiB used, above the default 1 GiB limit), with `faults`. */
function busyGpu(faults: SimFault[]): string {
  return writeScenario({
    devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 50 * GiB } })],
    faults,
  });
}

const WAIT_ARGS = ['wait', '--stable', '0s', '--timeout', '120s', '--interval', '100ms', '--stale', 'ignore', '--nvml-timeout', '60s'];

async function until(what: string, predicate: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function terminate(cli: CliProcess): Promise<{ code: number | null; stderr: string; afterSignalMs: number }> {
  const sent = performance.now();
  cli.child.kill('SIGTERM');
  const run = await cli.done;
  return { code: run.code, stderr: run.stderr, afterSignalMs: performance.now() - sent };
}

describe('SIGTERM during gpugate wait', () => {
  it('before the first poll (NVML still opening): exits 143 within about a second', async () => {
    const cli = startCli(WAIT_ARGS, { env: cliEnv(busyGpu([{ function: 'nvmlInit_v2', delayMs: 8000 }])) });
    // The simulator is mapped (in the NVML helper process, or in-process) once the open has begun: the signal handlers are installed by then.
    await until('the simulator to be loaded', () => cli.child.pid !== undefined && mapsHereOrInChild(cli.child.pid, 'gpugate_sim'));
    const run = await terminate(cli);
    expect(run.code, run.stderr).toBe(143);
    expect(logText(run.stderr)).toMatch(/interrupted by SIGTERM after .*\(exit 143\/SIGTERM\)/);
    expect(logText(run.stderr)).not.toMatch(/internal error|\n\s+at /);
    expect(run.afterSignalMs).toBeLessThan(EXIT_BOUND_MS);
  });

  it('in the middle of a slow poll: exits 143 within about a second with the last state', async () => {
    // Every memory read after the first two takes 700 ms: the command spends most of its time inside a poll.
    const cli = startCli(WAIT_ARGS, { env: cliEnv(busyGpu([{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 700, fromCall: 2 }])) });
    await cli.waitFor(/waiting gpu=0 /);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const run = await terminate(cli);
    expect(run.code, run.stderr).toBe(143);
    expect(logText(run.stderr)).toMatch(/interrupted gpu=0 .*used=50GiB/);
    expect(logText(run.stderr)).toMatch(/interrupted by SIGTERM after .*\(exit 143\/SIGTERM\)/);
    expect(run.afterSignalMs).toBeLessThan(EXIT_BOUND_MS);
  });

  it('while an NVML call hangs (deadline far away): exits 143 within about a second with the last state', async () => {
    // Call 0 lists the devices, call 1 is the first poll; the second poll never returns.
    const cli = startCli(WAIT_ARGS, { env: cliEnv(busyGpu([{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true, fromCall: 2 }])) });
    await cli.waitFor(/waiting gpu=0 /);
    await new Promise((resolve) => setTimeout(resolve, 400)); // the next poll is now stuck
    const run = await terminate(cli);
    expect(run.code, run.stderr).toBe(143);
    expect(logText(run.stderr)).toMatch(/interrupted gpu=0 .*used=50GiB/);
    expect(logText(run.stderr)).toMatch(/interrupted by SIGTERM after .*\(exit 143\/SIGTERM\)/);
    expect(logText(run.stderr)).not.toMatch(/internal error|\n\s+at /);
    expect(run.afterSignalMs).toBeLessThan(EXIT_BOUND_MS);
  });

  it('the message gives the time the signal came, not the exit: a hung call holds the exit a grace period later', async () => {
    // The second poll never returns, so the command ends only when the grace after the signal runs out.
    const cli = startCli([...WAIT_ARGS, '--json'], { env: cliEnv(busyGpu([{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true, fromCall: 2 }])) });
    await cli.waitFor(/waiting gpu=0 /);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const run = await terminate(cli);
    expect(run.code, run.stderr).toBe(143);
    const document = JSON.parse(cli.stdout()) as { result: string; reason: string; elapsedMs: number };
    expect(document.result).toBe('interrupted');
    // The figures are the command's own: its elapsed time at exit, and the reason's time of the signal.
    const said = /^interrupted by SIGTERM after (\S+)$/.exec(document.reason);
    expect(said, document.reason).not.toBeNull();
    const signalledMs = parseDuration(said![1]!);
    expect(signalledMs).toBeGreaterThan(0);
    expect(signalledMs).toBeLessThanOrEqual(document.elapsedMs - InterruptWatch.GRACE_MS);
    expect(run.stderr).toContain(`event=failed result=interrupted reason="interrupted by SIGTERM after ${said![1]}" exit=143 exit_name=SIGTERM`);
  });

  it('a second SIGTERM while the first is being handled still exits 143', async () => {
    const cli = startCli(WAIT_ARGS, { env: cliEnv(busyGpu([{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true, fromCall: 2 }])) });
    await cli.waitFor(/waiting gpu=0 /);
    await new Promise((resolve) => setTimeout(resolve, 400));
    cli.child.kill('SIGTERM');
    const run = await terminate(cli);
    expect(run.code, run.stderr).toBe(143);
    expect(run.afterSignalMs).toBeLessThan(EXIT_BOUND_MS);
  });
});
