/**
 * GPUs whose memory gpugate cannot judge where it runs end a gate at once with exit 69 and a
 * reason that says why and what would help, never "ready" and never an endless wait: a memory
 * query answering NO_PERMISSION (a MIG GPU's parent inside a container), a MIG instance reporting
 * the whole GPU's totals as its own, and an integrated GPU whose memory queries answer
 * NOT_SUPPORTED (GB10, GH200, Jetson). The built CLI against scenarios/unjudgeable-memory.json.
 * No `--timeout` is given: the command must end by itself (the runner kills it after 20 s).
 */
import { describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';

const env = (): NodeJS.ProcessEnv => cliEnv(bundledScenario('unjudgeable-memory'));
const SLICE = 'MIG-5f2c7d3e-9b4a-5e8f-a016-7d2b3f9a4e01';

async function waitOn(gpu: string, extra: string[] = ['--min-free', '0.5']): Promise<{ code: number | null; json: Record<string, unknown>; stderr: string }> {
  const run = await runCli(['wait', '--gpus', gpu, ...extra, '--interval', '100ms', '--json'], { env: env(), killAfterMs: 20_000 });
  return { code: run.code, json: parseJsonOutput(run), stderr: run.stderr };
}

describe('memory that cannot be judged here ends the gate at once (exit 69)', () => {
  it('NO_PERMISSION on the GPU\'s memory query: names the code and what would help', async () => {
    const { code, json, stderr } = await waitOn('1');
    expect(code).toBe(69);
    expect(json.result).toBe('unavailable');
    expect(json.error).toMatchObject({ code: 'NVML_ERROR_NO_PERMISSION' });
    expect(stderr).toMatch(/GPU 1 .*answers NO_PERMISSION, as a MIG GPU's parent does inside a container: .*select the MIG instance .*or run gpugate as root on the host/);
  });

  it('a MIG instance that reports the whole GPU\'s totals: GPUGATE_MEMORY_UNJUDGEABLE', async () => {
    const { code, json, stderr } = await waitOn(SLICE);
    expect(code).toBe(69);
    expect(json.error).toMatchObject({ code: 'GPUGATE_MEMORY_UNJUDGEABLE' });
    expect(stderr).toMatch(/MIG instance reports the whole GPU's memory as its own \(total 95\.6GiB, the GPU's 95\.6GiB\)/);
  });

  it('an integrated GPU whose memory queries answer NOT_SUPPORTED (GB10)', async () => {
    const { code, json, stderr } = await waitOn('2');
    expect(code).toBe(69);
    expect(json.error).toMatchObject({ code: 'NVML_ERROR_NOT_SUPPORTED' });
    expect(stderr).toMatch(/unified-memory systems .*use --no-processes/);
  });

  it('check answers the same, and a criterion that needs no memory figure still judges those GPUs', async () => {
    const check = await runCli(['check', '--gpus', '1', '--max-used', '1GiB', '--json'], { env: env(), killAfterMs: 20_000 });
    expect(check.code).toBe(69);
    expect(parseJsonOutput(check).error).toMatchObject({ code: 'NVML_ERROR_NO_PERMISSION' });
    const byProcesses = await runCli(['check', '--gpus', '1,2', '--no-processes', '--json'], { env: env(), killAfterMs: 20_000 });
    expect(byProcesses.code).toBe(0);
  });

  it('a MIG instance with its own figures is judged as usual', async () => {
    const parent = simDevice(0, {
      migMode: true,
      maxMigDevices: 4,
      migDevices: [{ slot: 0, uuid: SLICE, gpuInstanceId: 3, computeInstanceId: 0, memory: { totalBytes: 25098715136, reservedBytes: 0, usedBytes: 0 } }],
    });
    const run = await runCli(['wait', '--gpus', SLICE, '--min-free', '0.5', '--stable', '0s', '--json'], { env: cliEnv(writeScenario({ devices: [parent] })), killAfterMs: 20_000 });
    expect(run.code).toBe(0);
    expect(parseJsonOutput(run).result).toBe('ready');
  });
});
