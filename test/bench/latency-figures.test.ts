/**
 * The one nearest-rank percentile and the one nanosecond text, shared by `gpugate bench` and the
 * benchmark harness (bench/): they print a time the same way at every magnitude.
 */
import { describe, expect, it } from 'vitest';
import { formatNanoseconds, nearestRankPercentile } from '../../src/latency-figures';
import { formatBenchResult } from '../../src/cli/bench-text';
import type { BenchResult, LatencyStats } from '../../src/bench/run-bench';
import { summarize } from '../../bench/stats';

describe('nearestRankPercentile', () => {
  it('takes the sample at rank ceil(p × n), clamped to the sample', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(nearestRankPercentile(sorted, 0.5)).toBe(50);
    expect(nearestRankPercentile(sorted, 0.99)).toBe(99);
    expect(nearestRankPercentile(sorted, 1)).toBe(100);
    expect(nearestRankPercentile([4, 9], 0.001)).toBe(4);
    expect(nearestRankPercentile([7], 0.99)).toBe(7);
  });

  it('refuses an empty sample instead of inventing a figure', () => {
    expect(() => nearestRankPercentile([], 0.5)).toThrow(RangeError);
  });

  it('is what the harness summarises with', () => {
    expect(summarize([30, 10, 20], 1)).toEqual({ samples: 3, batch: 1, median: 20, p99: 30, max: 30, mean: 20 });
  });
});

describe('formatNanoseconds', () => {
  it('prints each magnitude in its unit, two decimals below 10 of it', () => {
    expect(formatNanoseconds(850)).toBe('850 ns');
    expect(formatNanoseconds(4_200)).toBe('4.20 µs');
    expect(formatNanoseconds(42_000)).toBe('42.0 µs');
    expect(formatNanoseconds(3_140_000)).toBe('3.14 ms');
    expect(formatNanoseconds(31_500_000)).toBe('31.5 ms');
    expect(formatNanoseconds(1_500_000_000)).toBe('1.50 s');
    expect(formatNanoseconds(Number.NaN)).toBe('n/a');
  });
});

describe("gpugate bench's table", () => {
  const stats = (medianUs: number): LatencyStats => ({ samples: 3, medianUs, p99Us: medianUs, maxUs: medianUs, meanUs: medianUs });
  const result = (smiMedianUs: number): BenchResult => ({
    deviceCount: 1, libraryPath: 'libnvidia-ml.so.1', driverVersion: null, iterations: 3, durationMs: 10_000,
    memoryOnly: { perSnapshot: stats(12.5), perDevice: stats(12.5) },
    withProcesses: { perSnapshot: stats(0.5), perDevice: stats(0.5) },
    nvidiaSmi: { path: '/usr/bin/nvidia-smi', args: [], perRun: stats(smiMedianUs), error: null },
    speedupVsNvidiaSmi: null, stoppedByDuration: false, elapsedMs: 1,
  });

  it('prints times as the harness does: a run over a second in seconds, not thousands of milliseconds', () => {
    const text = formatBenchResult(result(1_500_000));
    expect(text).toMatch(/nvidia-smi --query-gpu=memory\.used\s+3\s+1\.50 s\s+1\.50 s\s+1\.50 s\n/);
    expect(text).toMatch(/gpugate snapshot, memory only\s+3\s+12\.5 µs/);
    expect(text).toMatch(/gpugate snapshot, with processes\s+3\s+500 ns/);
    expect(formatBenchResult(result(45_000))).toMatch(/nvidia-smi --query-gpu=memory\.used\s+3\s+45\.0 ms/);
  });
});
