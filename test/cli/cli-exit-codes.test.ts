/**
 * Each exit code of the contract's table, produced by a real situation: the built command as a
 * subprocess, reading the NVML simulator through the real addon, with real processes as holders.
 * (64 and 78 are in cli-usage.test.ts; 130/143 in cli-signals.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';
import { killSpawned, spawnSleeper } from '../helpers/processes';
import { logText } from '../helpers/log-lines';

const GiB = 1024 ** 3;
// Real processes stand as GPU holders (spawnSleeper), killed after the tests.
afterAll(killSpawned);

describe('gpugate exit codes', () => {
  it('exits 0 from check when every GPU is idle', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1)] });
    const run = await runCli(['check'], { env: cliEnv(scenario) });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^event=ready gpus=0,1 /m);
  });

  it('exits 75 from check when a real process holds the GPU, naming it', async () => {
    const pid = await spawnSleeper();
    const scenario = writeScenario({
      devices: [
        simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB }, processes: [{ pid, usedBytes: 40 * GiB, kinds: ['compute'] }] }),
        simDevice(1),
      ],
    });
    const run = await runCli(['check', '--max-used', '1GiB', '--json'], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    expect(logText(run.stderr)).toMatch(new RegExp(`busy gpu=0 .*holders=${pid}/sleep/active`));
    const json = parseJsonOutput(run);
    expect(json.result).toBe('busy');
    const gpus = json.gpus as Array<{ index: number; ok: boolean; holders: Array<{ pid: number; class: string }> }>;
    expect(gpus.map((gpu) => [gpu.index, gpu.ok])).toEqual([[0, false], [1, true]]);
    expect(gpus[0]?.holders).toEqual([expect.objectContaining({ pid, class: 'active' })]);
  });

  it('exits 75 when wait times out, and the JSON names the GPU and its holder', async () => {
    const pid = await spawnSleeper();
    const scenario = writeScenario({
      devices: [
        simDevice(0),
        simDevice(1, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 90 * GiB }, processes: [{ pid, usedBytes: 90 * GiB, kinds: ['compute'] }] }),
      ],
    });
    const run = await runCli(['wait', '--min-free', '0.9', '--stable', '200ms', '--timeout', '1s', '--interval', '100ms', '--json'], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    const json = parseJsonOutput(run);
    expect(json).toMatchObject({ command: 'wait', result: 'timeout', exitCode: 75 });
    const busy = (json.gpus as Array<{ index: number; uuid: string; ok: boolean; reasons: string[]; holders: Array<{ pid: number; class: string; name: string }> }>).filter((gpu) => !gpu.ok);
    expect(busy).toHaveLength(1);
    expect(busy[0]).toMatchObject({ index: 1, uuid: 'GPU-7e570000-0000-4000-8000-000000000001', reasons: ['memory'] });
    expect(busy[0]?.holders).toEqual([expect.objectContaining({ pid, class: 'active', name: 'sleep' })]);
    expect(String(json.reason)).toContain('GPU-7e570000-0000-4000-8000-000000000001');
    expect(run.stderr).toMatch(new RegExp(`^event=timeout gpu=1 .*holders=${pid}/sleep/active`, 'm'));
  });

  it('exits 69 when an NVML call hangs, within --nvml-timeout plus a second', async () => {
    const scenario = writeScenario({
      // 512 MiB in use with no process listed (memory that may still come back): the wait keeps
      // polling for its stability window instead of settling at once.
      devices: [simDevice(0, { memory: { totalBytes: 97887 * 2 ** 20, reservedBytes: 0, usedBytes: 512 * 2 ** 20 } })],
      // The first snapshots answer; from the 4th memory query on, the driver never answers.
      faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true, fromCall: 4 }],
    });
    const run = await runCli(['wait', '--max-used', '1GiB', '--stable', '10s', '--interval', '100ms', '--nvml-timeout', '1s', '--json'], { env: cliEnv(scenario), killAfterMs: 25_000 });
    expect(run.signal).toBeNull();
    expect(run.code).toBe(69);
    const json = parseJsonOutput(run);
    expect(json.result).toBe('unavailable');
    // Generous: the deadline is 1 s, the stall is detected at most 1 s later; node start-up on a busy machine on top.
    expect(run.elapsedMs).toBeLessThan(9000);
  });

  it('exits 69 when nvmlInit hangs', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlInit_v2', hang: true }] });
    const run = await runCli(['check', '--nvml-timeout', '1s'], { env: cliEnv(scenario), killAfterMs: 25_000 });
    expect(run.signal).toBeNull();
    expect(run.code).toBe(69);
    expect(run.elapsedMs).toBeLessThan(9000);
  });

  it('exits 69 when the NVML library is missing, naming the path tried', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)] });
    const run = await runCli(['wait', '--library', '/nonexistent/libnvidia-ml.so.1'], { env: cliEnv(scenario) });
    expect(run.code).toBe(69);
    expect(logText(run.stderr)).toContain('/nonexistent/libnvidia-ml.so.1');
    expect(run.stderr).toMatch(/^event=failed result=unavailable reason=".*" exit=69 exit_name=UNAVAILABLE$/m);
  });

  it('exits 69 at once when a selected GPU has fallen off the bus', async () => {
    const run = await runCli(['wait', '--timeout', '20s', '--json'], { env: cliEnv(bundledScenario('lost-gpu')) });
    expect(run.code).toBe(69);
    expect(parseJsonOutput(run).error).toMatchObject({ code: 'NVML_ERROR_GPU_IS_LOST' });
    expect(run.elapsedMs).toBeLessThan(15_000);
  });

  it('exits 0 for the same lost-GPU host when only healthy GPUs are selected', async () => {
    const run = await runCli(['check', '--gpus', '0,1'], { env: cliEnv(bundledScenario('lost-gpu')) });
    expect(run.code).toBe(0);
  });

  it('status exits 69 when a selected GPU is lost, still listing every GPU, the lost one with null identity', async () => {
    const env = cliEnv(bundledScenario('lost-gpu'));
    const json = await runCli(['status', '--json'], { env });
    expect(json.code, json.stderr).toBe(69);
    const document = parseJsonOutput(json);
    expect(document).toMatchObject({ command: 'status', result: 'unavailable', exitCode: 69 });
    const devices = document.devices as Array<{ index: number; uuid: string | null; name: string | null; pciBusId: string | null; error: { code: string } | null }>;
    expect(devices.map((device) => device.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(devices[5]).toMatchObject({ uuid: null, name: null, pciBusId: null, error: { code: 'NVML_ERROR_GPU_IS_LOST' } });
    expect(devices[4]?.uuid).toBe('GPU-a6f03c81-9d4e-4b27-8c5a-2e7f1d9b6a03');
    expect(document.problems).toEqual([{ index: 5, code: 'NVML_ERROR_GPU_IS_LOST', message: 'GPU 5 (identity unknown): GPU is lost' }]);
    expect(logText(json.stderr)).toContain('GPU 5 (identity unknown): GPU is lost (NVML_ERROR_GPU_IS_LOST)');

    const text = await runCli(['status', '--gpus', '4,5'], { env });
    expect(text.code).toBe(69);
    expect(text.stdout).toMatch(/^5 +unknown +- /m);
    expect(text.stdout).toContain('UUID unknown');
    expect(text.stdout).toContain('error: NVML_ERROR_GPU_IS_LOST: GPU is lost');
    expect(logText(text.stderr)).toContain('(exit 69/UNAVAILABLE)');
    // No message or line names a GPU by empty fields.
    for (const output of [json.stdout, json.stderr, text.stdout, text.stderr]) {
      expect(output).not.toContain('(, )');
      expect(output).not.toContain('"uuid":""');
    }
    // holders lists every GPU too, and ends with 69 for the same reading: the lost GPU's holders cannot be known.
    const holders = await runCli(['holders', '--json'], { env });
    expect(holders.code, holders.stderr).toBe(69);
    expect(parseJsonOutput(holders)).toMatchObject({ command: 'holders', result: 'unavailable', exitCode: 69, problems: [{ index: 5, code: 'NVML_ERROR_GPU_IS_LOST' }] });
    expect((parseJsonOutput(holders).gpus as unknown[]).length).toBe(8);
    const holdersText = await runCli(['holders', '--gpus', '4,5'], { env });
    expect(holdersText.code).toBe(69);
    expect(logText(holdersText.stderr)).toContain('GPU 5 (identity unknown): GPU is lost (NVML_ERROR_GPU_IS_LOST)');
    expect((await runCli(['holders', '--gpus', '4'], { env })).code).toBe(0);
    // The gate's message names the lost GPU the same way.
    const check = await runCli(['check', '--json'], { env });
    expect(check.code).toBe(69);
    expect(parseJsonOutput(check).reason).toBe('GPU 5 (identity unknown): GPU is lost; waiting cannot help');
    // Only healthy GPUs selected: 0.
    expect((await runCli(['status', '--gpus', '0,1'], { env })).code).toBe(0);
  });

  it('status prints implausible memory figures with a comment and exits 69, as the gate does for the same reading', async () => {
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 88 * GiB, freeBytes: 120 * GiB } }), simDevice(1)],
    });
    // Wide enough that the comment stays on one line (a pipe wraps the table at 80 columns).
    const text = await runCli(['status'], { env: { ...cliEnv(scenario), COLUMNS: '400' } });
    expect(text.code, text.stderr).toBe(69);
    expect(text.stdout).toMatch(/memory figures implausible: total 96GiB .*free exceeds total; gpugate cannot judge this GPU/);
    expect(logText(text.stderr)).toMatch(/GPU 0 \(GPU-7e570000-0000-4000-8000-000000000000, 00000000:10:00\.0\): implausible memory figures .*\(GPUGATE_MEMORY_IMPLAUSIBLE\)/);
    const json = await runCli(['status', '--json'], { env: cliEnv(scenario) });
    expect(json.code).toBe(69);
    const document = parseJsonOutput(json);
    expect(document).toMatchObject({ result: 'unavailable', exitCode: 69, problems: [{ index: 0, code: 'GPUGATE_MEMORY_IMPLAUSIBLE' }] });
    const memory = (document.devices as Array<{ memory: { implausible: string | null } }>).map((device) => device.memory.implausible);
    expect(memory[0]).toMatch(/free exceeds total/);
    expect(memory[1]).toBeNull();
    expect((await runCli(['check', '--max-used', '95%'], { env: cliEnv(scenario) })).code).toBe(69);
    expect((await runCli(['status', '--gpus', '1'], { env: cliEnv(scenario) })).code).toBe(0);
  });

  it('writes the final reason to --report-file', async () => {
    const pid = await spawnSleeper();
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 8 * GiB }, processes: [{ pid, usedBytes: 8 * GiB, kinds: ['compute'] }] })],
    });
    const report = `${writeScenario('')}.reason`;
    // The host never frees: the deadline only has to follow the first read, even on a loaded machine.
    const run = await runCli(['wait', '--timeout', '2s', '--report-file', report], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    const line = readFileSync(report, 'utf8');
    expect(line.endsWith('\n')).toBe(true);
    expect(line.trim().split('\n')).toHaveLength(1);
    expect(line).toContain('GPU 0 (GPU-7e570000-0000-4000-8000-000000000000)');
    expect(line).toContain('used 8GiB > allowed 1GiB');
  });
});
