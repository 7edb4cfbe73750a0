/**
 * `--for vllm` / `minFree: { engine: 'vllm', utilization }`: gpugate judges free memory the way
 * vLLM's own start check does (CUDA's total = NVML's total − reserved; CUDA's free = NVML's free −
 * the CUDA context vLLM creates first; ready when free >= ceil(total × utilization)). The built CLI
 * as a subprocess and the library, both reading the NVML simulator through the real addon, on a
 * simulated RTX PRO 6000 (97887 MiB total, 640 MiB reserved, 555 MiB context).
 */
import { describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator, useScenario } from '../helpers/session-helpers';
import { ConfigError } from '../../src/config-error';
import { DEFAULT_CUDA_CONTEXT_BYTES, cudaContextBytes } from '../../src/gate/cuda-context-sizes';
import { checkGpusOnce } from '../../src/gate/wait';
import { logText } from '../helpers/log-lines';

const MiB = 2 ** 20;
const TOTAL = 97887 * MiB;
const RESERVED = 640 * MiB;
const CUDA_TOTAL = TOTAL - RESERVED;
const CONTEXT = 555 * MiB;

/** NVML free memory vLLM at `utilization` needs on this GPU: its request plus its own context. */
function vllmNeeds(utilization: number): number {
  return Math.ceil(CUDA_TOTAL * utilization) + CONTEXT;
}

/** One simulated RTX PRO 6000 with `freeBytes` free (the simulator derives free = total − reserved − used). */
function rtxPro(freeBytes: number): { totalBytes: number; reservedBytes: number; usedBytes: number } {
  return { totalBytes: TOTAL, reservedBytes: RESERVED, usedBytes: CUDA_TOTAL - freeBytes };
}

function scenarioWithFree(freeBytes: number): string {
  return writeScenario({ devices: [simDevice(0, { memory: rtxPro(freeBytes) })] });
}

describe('the context size table', () => {
  it('knows the RTX PRO 6000 and gives an unknown model the documented default', () => {
    expect(cudaContextBytes('NVIDIA RTX PRO 6000 Blackwell Server Edition').bytes).toBe(CONTEXT);
    expect(cudaContextBytes('NVIDIA Imaginary 9000')).toEqual({ bytes: DEFAULT_CUDA_CONTEXT_BYTES, source: 'default for a model not in the table' });
    expect(DEFAULT_CUDA_CONTEXT_BYTES).toBe(512 * MiB);
  });
});

describe('gpugate check --for vllm on a simulated RTX PRO 6000', () => {
  it('is ready with exactly what vLLM at 0.9 needs free, and busy 1 MiB short of it', async () => {
    const exact = await runCli(['check', '--for', 'vllm', '--min-free', '0.9', '--json'], { env: cliEnv(scenarioWithFree(vllmNeeds(0.9))) });
    expect(exact.code).toBe(0);
    const gpu = (parseJsonOutput(exact).gpus as Array<Record<string, unknown>>)[0];
    expect(gpu?.neededFreeBytes).toBe(vllmNeeds(0.9));
    expect(gpu?.engineView).toEqual({
      engine: 'vllm',
      utilization: 0.9,
      contextBytes: CONTEXT,
      cudaFreeBytes: vllmNeeds(0.9) - CONTEXT,
      cudaTotalBytes: CUDA_TOTAL,
      requestedBytes: Math.ceil(CUDA_TOTAL * 0.9),
      ok: true,
    });
    expect(logText(exact.stderr)).toContain('GPU 0: vLLM at 0.9 would see 85.47/94.97 GiB free and pass (it asks for 85.47 GiB)');

    const short = await runCli(['check', '--for', 'vllm', '--min-free', '0.9', '--json'], { env: cliEnv(scenarioWithFree(vllmNeeds(0.9) - MiB)) });
    expect(short.code).toBe(75);
    const json = parseJsonOutput(short);
    expect(json.result).toBe('busy');
    expect((json.gpus as Array<{ engineView: { ok: boolean } }>)[0]?.engineView.ok).toBe(false);
    expect(logText(short.stderr)).toContain('vLLM at 0.9 would see 85.47/94.97 GiB free and fail (it asks for 85.47 GiB)');
  });

  it('at 0.5 refuses memory that a plain --min-free 0.5 accepts but vLLM would not', async () => {
    // 49000 MiB free: above half of NVML's total (48943.5 MiB), below half of CUDA's total plus the context (49178.5 MiB).
    const env = cliEnv(scenarioWithFree(49000 * MiB));
    expect((await runCli(['check', '--min-free', '0.5'], { env })).code).toBe(0);
    const engine = await runCli(['check', '--for', 'vllm', '--min-free', '0.5'], { env });
    expect(engine.code).toBe(75);
    expect(logText(engine.stderr)).toContain('vLLM at 0.5 would see 47.31/94.97 GiB free and fail (it asks for 47.48 GiB)');
  });

  it('at 0.9 accepts memory that a plain --min-free 0.9 refuses though vLLM would start', async () => {
    // 88090 MiB free: enough for vLLM (88077.3 MiB with its context), short of 0.9 of NVML's total (88098.3 MiB).
    const env = cliEnv(scenarioWithFree(88090 * MiB));
    expect((await runCli(['check', '--min-free', '0.9'], { env })).code).toBe(75);
    expect((await runCli(['check', '--for', 'vllm', '--min-free', '90%'], { env })).code).toBe(0);
  });

  it('adds --margin on top of what vLLM needs', async () => {
    const env = cliEnv(scenarioWithFree(vllmNeeds(0.9) + 2048 * MiB));
    expect((await runCli(['check', '--for', 'vllm', '--min-free', '0.9', '--margin', '2GiB'], { env })).code).toBe(0);
    const over = await runCli(['check', '--for', 'vllm', '--min-free', '0.9', '--margin', '2049MiB'], { env });
    expect(over.code).toBe(75);
    // vLLM itself would start: the margin is gpugate's, and the line says so.
    expect(logText(over.stderr)).toContain('vLLM at 0.9 would see 87.47/94.97 GiB free and pass');
  });

  it('takes the same criterion in wait and select', async () => {
    const env = cliEnv(scenarioWithFree(vllmNeeds(0.9)));
    const wait = await runCli(['wait', '--for', 'vllm', '--min-free', '0.9', '--stable', '0s', '--timeout', '20s', '--interval', '50ms'], { env });
    expect(wait.code).toBe(0);
    expect(logText(wait.stderr)).toContain('vLLM at 0.9 would see 85.47/94.97 GiB free and pass');
    const shortEnv = cliEnv(scenarioWithFree(vllmNeeds(0.9) - MiB));
    expect((await runCli(['select', '-n', '1', '--no-lease', '--for', 'vllm', '--min-free', '0.9'], { env })).code).toBe(0);
    expect((await runCli(['select', '-n', '1', '--no-lease', '--for', 'vllm', '--min-free', '0.9'], { env: shortEnv })).code).toBe(75);
  });

  it('exits 64 for an unknown engine, a size, or no --min-free, naming what it expected', async () => {
    const env = cliEnv(scenarioWithFree(vllmNeeds(0.9)));
    const unknown = await runCli(['check', '--for', 'sglang', '--min-free', '0.9'], { env });
    expect(unknown.code).toBe(64);
    expect(logText(unknown.stderr)).toContain('--for "sglang": expected one of vllm');
    const size = await runCli(['wait', '--for', 'vllm', '--min-free', '80GiB'], { env });
    expect(size.code).toBe(64);
    expect(logText(size.stderr)).toContain('--min-free "80GiB": with --for vllm expected a fraction');
    const missing = await runCli(['select', '-n', '1', '--for', 'vllm'], { env });
    expect(missing.code).toBe(64);
    expect(logText(missing.stderr)).toContain('give --min-free FRACTION');
  });
});

describe("the library's minFree: { engine: 'vllm' }", () => {
  it('draws the same boundary, and takes a measured contextBytes instead of the table', async () => {
    useScenario({ devices: [simDevice(0, { memory: rtxPro(vllmNeeds(0.9)) })] });
    const libraryPath = freshSimulator();
    const exact = await checkGpusOnce({ libraryPath, gpus: [0], minFree: { engine: 'vllm', utilization: 0.9 } });
    expect(exact.ok).toBe(true);
    expect(exact.devices[0]?.engineView?.cudaTotalBytes).toBe(CUDA_TOTAL);
    // A context measured 1 MiB larger than the table's figure leaves vLLM 1 MiB short.
    const larger = await checkGpusOnce({ libraryPath, gpus: [0], minFree: { engine: 'vllm', utilization: 0.9, contextBytes: CONTEXT + MiB } });
    expect(larger.ok).toBe(false);
    expect(larger.devices[0]?.reasons).toEqual(['memory']);
  });

  it('rejects an unknown engine or a utilization out of range with a ConfigError naming the value', async () => {
    const libraryPath = freshSimulator();
    const engine = await checkGpusOnce({ libraryPath, minFree: { engine: 'sglang' as 'vllm', utilization: 0.9 } }).catch((error: unknown) => error);
    expect(engine).toBeInstanceOf(ConfigError);
    expect((engine as Error).message).toContain('minFree engine "sglang" is not known: expected vllm');
    for (const utilization of [0, 1, 1.5, Number.NaN]) {
      const error = await checkGpusOnce({ libraryPath, minFree: { engine: 'vllm', utilization } }).catch((caught: unknown) => caught);
      expect(error, String(utilization)).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain(`minFree utilization ${utilization} is out of range`);
    }
  });
});
