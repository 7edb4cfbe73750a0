/**
 * Reclaim is one step, not a countdown: on real drivers a killed process's memory sits at its
 * full allocation while NVML keeps listing the pid (after /proc/PID is gone), then drops to the
 * baseline in one poll. Memory that holds still then proves nothing: a wait never calls such a
 * GPU stable while a holder is still releasing, and classifies the lingering pid as gone.
 * Through the real addon and the simulator (timing driven by the simulator's call counts), and
 * the shipped scenarios/one-step-reclaim.json through the built CLI.
 */
import { describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { goneProcessPid } from '../helpers/processes';
import { bundledScenario } from '../helpers/sim';
import { freshSimulator, GiB, rtxProDevice, useScenario } from '../helpers/session-helpers';
import { waitForGpusFree, type Evaluation } from '../../src/gate/wait';
import { existsSync } from 'node:fs';

describe('one-step reclaim with a lingering dead pid', () => {
  it('stays unstable while the dead pid is listed, however long memory holds still, and is ready after the drop', async () => {
    const pid = await goneProcessPid();
    // 30 GiB held by a pid that no longer exists; the 40th memory read finds it released at once.
    useScenario({
      devices: [rtxProDevice(0, 30 * GiB, [{ pid, usedBytes: 30 * GiB }])],
      timeline: [{ atCall: 40, function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, set: { memory: { usedBytes: 0 }, processes: [] } }],
    });
    const seen: Evaluation[] = [];
    const result = await waitForGpusFree({
      libraryPath: freshSimulator(),
      minFree: { fraction: 0.5 },
      stableMs: 300,
      intervalMs: 20,
      timeoutMs: 60_000,
      env: {},
      onPoll: (evaluation) => seen.push(evaluation),
    });
    const before = seen.filter((evaluation) => evaluation.devices[0]!.memory!.usedBytes === 30 * GiB);
    const after = seen.filter((evaluation) => evaluation.devices[0]!.memory!.usedBytes === 0);
    // One step: every poll saw the full allocation or the baseline, nothing between.
    expect(before.length + after.length).toBe(seen.length);
    expect(before.length).toBeGreaterThan(0);
    for (const evaluation of before) {
      const gpu = evaluation.devices[0]!;
      expect(gpu.ok).toBe(false);
      expect(gpu.reasons).toEqual(['unstable']);
      expect(gpu.holders.map((holder) => [holder.pid, holder.class])).toEqual([[pid, 'gone']]);
    }
    // The memory criterion held and memory did not move for longer than the window: the window
    // alone would have said "ready" before the release.
    expect(before.some((evaluation) => evaluation.devices[0]!.stableForMs >= 300)).toBe(true);
    expect(result.devices[0]).toMatchObject({ ok: true, holders: [] });
    expect(result.devices[0]!.memory!.usedBytes).toBe(0);
  });

  it('the CLI times out naming the releasing holder rather than calling the held memory stable', async () => {
    const pid = await goneProcessPid();
    const scenario = useScenario({ devices: [rtxProDevice(0, 30 * GiB, [{ pid, usedBytes: 30 * GiB }])] });
    const run = await runCli(['wait', '--min-free', '0.5', '--stable', '200ms', '--interval', '50ms', '--timeout', '2s', '--json'], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    const json = parseJsonOutput(run);
    expect(json.reason).toMatch(/unstable: 1 holder\(s\) still releasing memory, which comes back in one step; held by \d+\/\S+\/gone/);
  });
});

describe('scenarios/one-step-reclaim.json', () => {
  it('2 s after the crash: GPU 0 is back in one step, GPU 1 (pinned host pool) still lists its dead worker at full allocation', async () => {
    const env = cliEnv(bundledScenario('one-step-reclaim'), { GPUGATE_SIM_STARTED_AT: String(Date.now() - 2_000) });
    const run = await runCli(['check', '--min-free', '0.01', '--json'], { env });
    const gpus = parseJsonOutput(run).gpus as Array<{ usedBytes: number; holders: Array<{ pid: number; class: string }> }>;
    expect(gpus[0]).toMatchObject({ usedBytes: 0, holders: [] });
    expect(gpus[1]!.usedBytes).toBe(98784247808);
    expect(gpus[1]!.holders.map((holder) => holder.pid)).toEqual([48312]);
    if (!existsSync('/proc/48312')) expect(gpus[1]!.holders[0]!.class).toBe('gone');
  });
});
