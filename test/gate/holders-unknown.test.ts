/**
 * "No holders" and "holders unknown" are different answers. Where NVML's process lists answer
 * NO_PERMISSION (a MIG GPU inside a container) or NOT_SUPPORTED (vGPU guests, WSL), or report a
 * process's memory as "not available", every output says the holders (or their memory) are
 * unknown, why, and what would let gpugate see them: text, JSON, Prometheus and the evaluation
 * the API returns. The built CLI as a subprocess against the simulator through the real addon.
 */
import { describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';
import { checkGpusOnce } from '../../src/gate/wait';

const GiB = 1024 ** 3;

/** GPU 0 with 29 GiB in use and its compute list answering `code`; GPU 1 with a listed holder. */
function unreadableLists(code: number): string {
  return writeScenario({
    devices: [
      simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 29 * GiB }, processes: [{ pid: 4000001, usedBytes: 29 * GiB }] }),
      simDevice(1, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 2 * GiB }, processes: [{ pid: 4000002, usedBytes: 2 * GiB }] }),
    ],
    faults: [{ function: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 0, return: code }],
  });
}

describe('holders unknown: the process list is unreadable', () => {
  it('Prometheus leaves out the holder series of that GPU and says the holders are not known, with the NVML code', async () => {
    const run = await runCli(['holders', '--format', 'prometheus'], { env: cliEnv(unreadableLists(4)) });
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines.filter((line) => line.startsWith('gpugate_gpu_holders{gpu="0"'))).toEqual([]);
    expect(lines.filter((line) => line.startsWith('gpugate_gpu_holders_known{'))).toEqual([
      expect.stringMatching(/^gpugate_gpu_holders_known\{gpu="0",uuid="GPU-[^"]+",error="NVML_ERROR_NO_PERMISSION"\} 0$/),
      expect.stringMatching(/^gpugate_gpu_holders_known\{gpu="1",uuid="GPU-[^"]+"\} 1$/),
    ]);
    // The readable GPU keeps its series: "none" there is a fact.
    expect(lines.some((line) => line.startsWith('gpugate_gpu_holders{gpu="1"'))).toBe(true);
    expect(run.stdout).toContain('# HELP gpugate_gpu_holders_known ');
  });

  it('holders --json and the table say why the holders are unknown and what would let gpugate see them', async () => {
    const env = cliEnv(unreadableLists(4));
    const json = parseJsonOutput(await runCli(['holders', '--json'], { env }));
    const gpus = json.gpus as Array<{ holders: unknown[]; holdersUnknown: string | null }>;
    expect(gpus[0]?.holders).toEqual([]);
    expect(gpus[0]?.holdersUnknown).toMatch(/NVML_ERROR_NO_PERMISSION from nvmlDeviceGetComputeRunningProcesses_v3.*run gpugate as root on the host, in the host PID namespace/);
    expect(gpus[1]?.holdersUnknown).toBeNull();
    // Wide enough to keep each row whole (off a terminal, tables fit 80 columns).
    const table = await runCli(['holders'], { env: { ...env, COLUMNS: '400' } });
    expect(table.stdout).toMatch(/^0 +- +unreadable +29GiB .*NVML_ERROR_NO_PERMISSION.*host PID namespace/m);
  });

  it('a failing check names the GPU\'s holders as unknown (NOT_SUPPORTED: vGPU, WSL), in its reason and its JSON', async () => {
    const run = await runCli(['check', '--gpus', '0', '--min-free', '0.9', '--json'], { env: cliEnv(unreadableLists(3)) });
    const json = parseJsonOutput(run);
    expect(json.result).toBe('busy');
    const gpu = (json.gpus as Array<{ holders: unknown[]; holdersUnknown: string | null }>)[0];
    expect(gpu?.holders).toEqual([]);
    expect(gpu?.holdersUnknown).toMatch(/NVML_ERROR_NOT_SUPPORTED .*vGPU guests, WSL/);
    expect(json.reason).toMatch(/free 67GiB < needed 86.4GiB; NVML's process list could not be read \(NVML_ERROR_NOT_SUPPORTED/);
  });

  it('the API\'s evaluation carries the same answer, and null where the list was read', async () => {
    const previous = process.env.GPUGATE_SIM_SCENARIO;
    process.env.GPUGATE_SIM_SCENARIO = unreadableLists(4);
    try {
      const evaluation = await checkGpusOnce({ gpus: [0, 1], libraryPath: freshSimulator(), maxUsed: { bytes: GiB } });
      expect(evaluation.devices.map((gpu) => gpu.holdersUnknown === null)).toEqual([false, true]);
      expect(evaluation.devices[0]?.holdersUnknown).toMatch(/NO_PERMISSION/);
    } finally {
      if (previous === undefined) delete process.env.GPUGATE_SIM_SCENARIO;
      else process.env.GPUGATE_SIM_SCENARIO = previous;
    }
  });
});

describe('holders unknown on a selected MIG instance', () => {
  it('a check on the instance says its holders are unknown, with the code of its own list', async () => {
    const slice = 'MIG-4a1c7e92-3b5d-5f08-9c2e-6d1a8b4f7e30';
    const scenario = writeScenario({
      devices: [simDevice(0, {
        migMode: true,
        maxMigDevices: 4,
        memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 20 * GiB },
        migDevices: [{ slot: 0, uuid: slice, gpuInstanceId: 3, computeInstanceId: 0, memory: { totalBytes: 24 * GiB, reservedBytes: 0, usedBytes: 20 * GiB }, processes: [{ pid: 4000004, usedBytes: 20 * GiB }] }],
      })],
      faults: [{ function: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 0, return: 4 }],
    });
    const json = parseJsonOutput(await runCli(['check', '--gpus', slice, '--min-free', '0.9', '--json'], { env: cliEnv(scenario) }));
    const gpu = (json.gpus as Array<{ uuid: string; holders: unknown[]; holdersUnknown: string | null }>)[0];
    expect(gpu?.uuid).toBe(slice);
    expect(gpu?.holders).toEqual([]);
    expect(gpu?.holdersUnknown).toMatch(/NVML_ERROR_NO_PERMISSION from nvmlDeviceGetComputeRunningProcesses_v3/);
  });
});

describe('holder memory unknown: NVML reports "not available" per process', () => {
  it('holders --json and the table name the holder but say its memory is unknown', async () => {
    const env = cliEnv(
      writeScenario({ devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 8 * GiB }, processes: [{ pid: 4000003, usedBytes: null }] })] }),
    );
    const json = parseJsonOutput(await runCli(['holders', '--json'], { env }));
    const gpu = (json.gpus as Array<{ holders: Array<{ pid: number; usedBytes: number | null }>; holdersUnknown: string | null; holderMemoryUnknown: string | null }>)[0];
    expect(gpu?.holders.map((holder) => [holder.pid, holder.usedBytes])).toEqual([[4000003, null]]);
    expect(gpu?.holdersUnknown).toBeNull();
    expect(gpu?.holderMemoryUnknown).toMatch(/no per-process memory here \("not available"/);
    const table = await runCli(['holders'], { env });
    expect(table.stdout).toMatch(/GPU 0: NVML reports no per-process memory here/);
  });
});

describe('scenarios/holders-unknown.json', () => {
  it('names, per GPU, why the holders or their memory are unknown', async () => {
    const json = parseJsonOutput(await runCli(['holders', '--json'], { env: cliEnv(bundledScenario('holders-unknown')) }));
    const gpus = json.gpus as Array<{ holdersUnknown: string | null; holderMemoryUnknown: string | null }>;
    expect(gpus.map((gpu) => gpu.holdersUnknown?.match(/NVML_ERROR_\w+/)?.[0] ?? null)).toEqual(['NVML_ERROR_NO_PERMISSION', 'NVML_ERROR_NOT_SUPPORTED', null]);
    expect(gpus.map((gpu) => gpu.holderMemoryUnknown !== null)).toEqual([false, false, true]);
  });
});
