/**
 * The table `gpugate bench` prints for one measure of src/bench/run-bench.ts.
 */

import type { BenchResult, LatencyStats } from '../bench/run-bench';
import { formatNanoseconds } from '../latency-figures';
import { escapeForTerminal } from './terminal-text';
import { textTable } from './text-table';

function formatUs(us: number): string {
  return formatNanoseconds(us * 1000);
}

/** The human-readable table `gpugate bench` prints. */
export function formatBenchResult(result: BenchResult): string {
  const rows: string[][] = [['measure', 'samples', 'median', 'p99', 'max']];
  const add = (label: string, stats: LatencyStats | null): void => {
    if (stats !== null) rows.push([label, String(stats.samples), formatUs(stats.medianUs), formatUs(stats.p99Us), formatUs(stats.maxUs)]);
  };
  add('gpugate snapshot, memory only', result.memoryOnly.perSnapshot);
  add('  per device', result.memoryOnly.perDevice);
  add('gpugate snapshot, with processes', result.withProcesses.perSnapshot);
  add('  per device', result.withProcesses.perDevice);
  if (result.nvidiaSmi !== null) add('nvidia-smi --query-gpu=memory.used', result.nvidiaSmi.perRun);
  const lines = [
    escapeForTerminal(`gpugate bench: ${result.deviceCount} GPU(s), library ${result.libraryPath}${result.driverVersion === null ? '' : `, driver ${result.driverVersion}`}`),
    textTable(rows, { alignRight: [1, 2, 3, 4] }),
  ];
  if (result.nvidiaSmi === null) lines.push('nvidia-smi: not found on PATH (no comparison)');
  else if (result.nvidiaSmi.error !== null) lines.push(escapeForTerminal(`nvidia-smi: ${result.nvidiaSmi.error}`));
  if (result.speedupVsNvidiaSmi !== null) {
    lines.push(`ratio: one memory-only snapshot is ${result.speedupVsNvidiaSmi.toFixed(result.speedupVsNvidiaSmi >= 100 ? 0 : 1)}× faster than one nvidia-smi run (medians)`);
  }
  if (result.stoppedByDuration) lines.push(`note: stopped early at the ${(result.durationMs / 1000).toFixed(1)} s limit; fewer samples than ${result.iterations}`);
  return lines.join('\n') + '\n';
}
