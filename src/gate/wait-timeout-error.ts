/**
 * GpuWaitTimeoutError: waitForGpusFree ran out of time. It carries the last evaluation, and its
 * message says per GPU what failed (memory, processes, stability, a read error) and who holds it.
 * The CLI maps it to exit code 75.
 */
import type { Evaluation, GpuEvaluation } from './wait';
import { formatBytes, formatDuration } from '../units';

function describeGpu(gpu: GpuEvaluation): string {
  const parts: string[] = [];
  for (const reason of gpu.reasons) {
    if (reason === 'memory' && gpu.memory) {
      const need: string[] = [];
      if (gpu.neededFreeBytes !== null) need.push(`free ${formatBytes(gpu.memory.freeBytes)} < needed ${formatBytes(gpu.neededFreeBytes)}`);
      if (gpu.maxUsedBytes !== null && gpu.memory.usedBytes > gpu.maxUsedBytes) need.push(`used ${formatBytes(gpu.memory.usedBytes)} > allowed ${formatBytes(gpu.maxUsedBytes)}`);
      parts.push(`memory (${need.join(', ') || 'threshold not met'})`);
    } else if (reason === 'processes') {
      parts.push(`processes (${gpu.holders.length} holder(s))`);
    } else if (reason === 'unstable') {
      parts.push(`unstable (free memory steady for only ${formatDuration(gpu.stableForMs)})`);
    } else if (reason === 'error') {
      parts.push(`error (${gpu.error ? `${gpu.error.code} from ${gpu.error.fn}` : 'memory unreadable'})`);
    }
  }
  const holders = gpu.holders.map((h) => `${h.pid}/${h.comm ?? '?'}/${h.class}`).join(',');
  return `GPU ${gpu.index} (${gpu.uuid}): ${parts.join('; ')}${holders ? `; holders ${holders}` : ''}`;
}

/** Rejection of waitForGpusFree when timeoutMs passes before every GPU is free and stable. */
export class GpuWaitTimeoutError extends Error {
  override readonly name = 'GpuWaitTimeoutError';
  readonly code = 'GPU_WAIT_TIMEOUT';
  /** The last evaluation, or null when no poll completed in time. */
  readonly evaluation: Evaluation | null;
  /** The timeout that passed. */
  readonly timeoutMs: number;

  constructor(timeoutMs: number, evaluation: Evaluation | null) {
    const failing = evaluation ? evaluation.devices.filter((d) => !d.ok) : [];
    const detail = evaluation === null ? 'no poll completed' : failing.map(describeGpu).join(' | ');
    super(`GPUs not free after ${formatDuration(timeoutMs)}: ${detail}`);
    this.evaluation = evaluation;
    this.timeoutMs = timeoutMs;
  }
}
