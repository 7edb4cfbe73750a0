/**
 * One measuring process of the benchmark. The harness (bench/run.ts) starts it once per scenario
 * and measure, with GPUGATE_NVML_LIBRARY and GPUGATE_SIM_SCENARIO set, so each process opens
 * exactly one NVML session (the simulator counts the initialisations). It loads the compiled
 * package (dist/) as users do, measures, closes the session and prints one JSON line on stdout.
 *
 * Modes (argv[2]), with a JSON parameter object in argv[3]:
 *   latency   {samples, targetBatchNs, warmupCalls, warmupMs, globalWarmupMs, processesPerDevice}:
 *             the in-process contenders; the async ones interleaved with `await fs.promises.stat('/')`,
 *             the platform's own thread-pool round trip, as their yardstick
 *   eventloop {durationMs}: event-loop delay while a process-list call sleeps (async, then sync)
 *   rss       {count, path}: resident memory before and after `count` snapshotSync / readMemorySync
 *             calls (run with --expose-gc)
 *   process-model {samples, targetBatchNs, warmupCalls, warmupMs, opens}: NVML in the helper
 *             process against NVML in this process, side by side: the awaited memory snapshot of
 *             each, interleaved with the thread-pool round trip, and the time an openNvml() takes
 *             in each mode (the helper's: spawning it plus NVML's init and identities)
 */
import { promises as fsp } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { NvmlMemoryReader, OpenNvmlOptions, Snapshot } from '../src/types';
import { packageEntry } from './paths';
import { measureAsyncInterleaved, measureSync, summarize, type BatchPlan, type LatencySummaryNs } from './stats';

type OpenNvml = (options?: OpenNvmlOptions) => Promise<NvmlMemoryReader>;

/**
 * The latency, event-loop and memory modes measure NVML on a thread of this process (the explicit
 * hot-loop mode), as their goals were set for; `process-model` sets the default helper process
 * beside it.
 */
const IN_PROCESS: OpenNvmlOptions = { nvmlProcess: 'in-process' };

function loadGpugate(): { openNvml: OpenNvml } {
  const gpugate = require(packageEntry()) as { openNvml?: OpenNvml };
  if (typeof gpugate.openNvml !== 'function') {
    throw new Error(`gpugate bench: ${packageEntry()} does not export openNvml (run npm run build:ts)`);
  }
  return { openNvml: gpugate.openNvml };
}

function checkSnapshot(snapshot: Snapshot, processesPerDevice: number | null): void {
  for (const device of snapshot.devices) {
    if (device.error !== null || device.memory === null) {
      throw new Error(`gpugate bench: device ${device.index} failed: ${JSON.stringify(device.error)}`);
    }
    if (processesPerDevice !== null && device.processes?.length !== processesPerDevice) {
      throw new Error(
        `gpugate bench: device ${device.index} listed ${device.processes?.length} processes, expected ${processesPerDevice}`,
      );
    }
  }
}

/** The typed-array read must agree with the decoded snapshot (5 slots per device; used at slot 2). */
function checkMemoryArray(out: Float64Array, snapshot: Snapshot): void {
  const slots = out.length / snapshot.devices.length;
  for (const device of snapshot.devices) {
    const used = out[device.index * slots + 2];
    if (used !== device.memory?.usedBytes) {
      throw new Error(`gpugate bench: readMemorySync gave ${used} used bytes for device ${device.index}, the snapshot ${device.memory?.usedBytes}`);
    }
  }
}

interface LatencyParams extends BatchPlan {
  processesPerDevice: number;
  /** Mixed calls of every kind before the first contender is timed. */
  globalWarmupMs: number;
}

async function latency(params: LatencyParams): Promise<unknown> {
  const session = await loadGpugate().openNvml(IN_PROCESS);
  try {
    const memoryOnly = { memoryOnly: true };
    const withProcesses = { memoryOnly: true, processes: true };
    const first = session.snapshotSync(memoryOnly);
    const deviceCount = first.devices.length;
    checkSnapshot(first, null);
    checkSnapshot(session.snapshotSync(withProcesses), params.processesPerDevice);
    checkSnapshot(await session.snapshot(withProcesses), params.processesPerDevice);
    checkSnapshot(await session.snapshot({ processes: true }), params.processesPerDevice);
    const out = session.readMemorySync();
    checkMemoryArray(out, first);

    // Warm the whole path (JIT tiers, the young generation's size, the worker thread) before any
    // contender is timed; each contender then has its own shorter warm-up too.
    const warmUntil = performance.now() + params.globalWarmupMs;
    while (performance.now() < warmUntil) {
      for (let i = 0; i < 50; i++) session.readMemorySync(out);
      for (let i = 0; i < 20; i++) session.snapshotSync(memoryOnly);
      for (let i = 0; i < 10; i++) session.snapshotSync(withProcesses);
      for (let i = 0; i < 10; i++) await session.snapshot(memoryOnly);
      for (let i = 0; i < 10; i++) await session.snapshot(withProcesses);
    }

    const contenders: Record<string, LatencySummaryNs> = {};
    contenders['nativeRead'] = measureSync(() => session.readMemorySync(out), params);
    contenders['snapshotSyncMemory'] = measureSync(() => session.snapshotSync(memoryOnly), params);
    contenders['snapshotSyncProcesses'] = measureSync(() => session.snapshotSync(withProcesses), params);
    // An awaited snapshot is a hand-off to the NVML thread and back, like a thread-pool call:
    // both swing with the machine's idle state, so they are timed side by side.
    const interleaved = await measureAsyncInterleaved(
      {
        threadPoolStat: () => fsp.stat('/'),
        snapshotAsyncMemory: () => session.snapshot(memoryOnly),
        snapshotAsyncProcesses: () => session.snapshot(withProcesses),
        snapshotAsyncFull: () => session.snapshot({ processes: true }),
      },
      params,
    );
    Object.assign(contenders, interleaved.summaries);
    return {
      deviceCount,
      nativeReadPath: 'session.readMemorySync(out: Float64Array)',
      contenders,
      threadPoolRatios: interleaved.ratiosToYardstick,
    };
  } finally {
    await session.close();
  }
}

interface ProcessModelParams extends BatchPlan {
  /** openNvml() + close() pairs timed per mode. */
  opens: number;
}

async function processModel(params: ProcessModelParams): Promise<unknown> {
  const { openNvml } = loadGpugate();
  const modes = ['helper', 'in-process'] as const;
  const openNs: Record<string, number[]> = { helper: [], 'in-process': [] };
  for (let i = 0; i < params.opens; i++) {
    for (const nvmlProcess of modes) {
      const start = performance.now();
      const session = await openNvml({ nvmlProcess });
      (openNs[nvmlProcess] as number[]).push((performance.now() - start) * 1e6);
      await session.close();
    }
  }
  const helper = await openNvml({ nvmlProcess: 'helper' });
  const inProcess = await openNvml({ nvmlProcess: 'in-process' });
  try {
    const memoryOnly = { memoryOnly: true };
    checkSnapshot(await helper.snapshot(memoryOnly), null);
    checkSnapshot(await inProcess.snapshot(memoryOnly), null);
    const interleaved = await measureAsyncInterleaved(
      {
        threadPoolStat: () => fsp.stat('/'),
        helperSnapshotAsyncMemory: () => helper.snapshot(memoryOnly),
        inProcessSnapshotAsyncMemory: () => inProcess.snapshot(memoryOnly),
      },
      params,
    );
    return {
      deviceCount: inProcess.deviceCount,
      openNs: { helper: summarize(openNs['helper'] as number[], 1), inProcess: summarize(openNs['in-process'] as number[], 1) },
      contenders: interleaved.summaries,
      threadPoolRatios: interleaved.ratiosToYardstick,
    };
  } finally {
    await helper.close();
    await inProcess.close();
  }
}

async function eventLoop(params: { durationMs: number }): Promise<unknown> {
  const resolutionMs = 1;
  const session = await loadGpugate().openNvml(IN_PROCESS);
  try {
    const withProcesses = { memoryOnly: true, processes: true };
    session.snapshotSync(withProcesses);
    const measure = async (op: () => Promise<unknown>): Promise<Record<string, number>> => {
      const histogram = monitorEventLoopDelay({ resolution: resolutionMs });
      histogram.enable();
      const start = performance.now();
      let snapshots = 0;
      while (performance.now() - start < params.durationMs) {
        await op();
        snapshots++;
      }
      const elapsedMs = performance.now() - start;
      histogram.disable();
      // The histogram records the interval between timer runs: subtract the nominal interval.
      const delayMs = (ns: number): number => Math.max(0, ns / 1e6 - resolutionMs);
      return {
        snapshots,
        snapshotMeanMs: elapsedMs / snapshots,
        timerRuns: histogram.count,
        delayP50Ms: delayMs(histogram.percentile(50)),
        delayP99Ms: delayMs(histogram.percentile(99)),
        delayMaxMs: delayMs(histogram.max),
      };
    };
    // The machine's own timer jitter: the same histogram while the loop only waits.
    const idle = await measure(() => new Promise<void>((resolve) => setTimeout(resolve, 20)));
    const asyncPath = await measure(() => session.snapshot(withProcesses));
    // The contrast: the blocking path, yielding to the event loop between snapshots.
    const syncPath = await measure(async () => {
      session.snapshotSync(withProcesses);
      await new Promise<void>((resolve) => setImmediate(resolve));
    });
    return { resolutionMs, idle, asyncPath, syncPath };
  } finally {
    await session.close();
  }
}

async function residentMemory(params: { count: number; path: 'snapshotSync' | 'readMemorySync' }): Promise<unknown> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('gpugate bench: the rss mode needs node --expose-gc');
  const session = await loadGpugate().openNvml(IN_PROCESS);
  try {
    const memoryOnly = { memoryOnly: true };
    const out = new Float64Array(session.deviceCount * 5);
    const op = params.path === 'readMemorySync' ? () => session.readMemorySync(out) : () => session.snapshotSync(memoryOnly);
    for (let i = 0; i < 10_000; i++) op();
    gc();
    const before = process.memoryUsage();
    const start = performance.now();
    // RSS after each eighth: a leak grows steadily, heap and allocator sizing levels off.
    const checkpointsBytes: number[] = [];
    for (let part = 0; part < 8; part++) {
      const end = Math.round(((part + 1) * params.count) / 8);
      for (let i = Math.round((part * params.count) / 8); i < end; i++) op();
      gc();
      checkpointsBytes.push(process.memoryUsage().rss - before.rss);
    }
    const elapsedMs = performance.now() - start;
    const after = process.memoryUsage();
    return {
      count: params.count,
      path: params.path === 'readMemorySync' ? 'readMemorySync(out)' : 'snapshotSync({ memoryOnly: true })',
      elapsedMs,
      rssBeforeBytes: before.rss,
      rssAfterBytes: after.rss,
      rssGrowthBytes: after.rss - before.rss,
      rssGrowthSecondHalfBytes: after.rss - before.rss - (checkpointsBytes[3] ?? 0),
      rssCheckpointsBytes: checkpointsBytes,
      heapUsedGrowthBytes: after.heapUsed - before.heapUsed,
      heapTotalGrowthBytes: after.heapTotal - before.heapTotal,
      nodeFlags: process.execArgv.join(' '),
    };
  } finally {
    await session.close();
  }
}

async function main(): Promise<void> {
  const mode = process.argv[2];
  const params = JSON.parse(process.argv[3] ?? '{}') as Record<string, unknown>;
  let result: unknown;
  if (mode === 'latency') result = await latency(params as unknown as LatencyParams);
  else if (mode === 'eventloop') result = await eventLoop(params as { durationMs: number });
  else if (mode === 'process-model') result = await processModel(params as unknown as ProcessModelParams);
  else if (mode === 'rss') result = await residentMemory(params as { count: number; path: 'snapshotSync' | 'readMemorySync' });
  else throw new Error(`gpugate bench worker: unknown mode ${String(mode)} (expected latency, eventloop or rss)`);
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
