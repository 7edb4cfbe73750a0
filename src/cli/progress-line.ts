/**
 * Renders one GPU's state as a logfmt progress line, e.g.
 * `waiting gpu=6 uuid=GPU-… bus=0000:9b:00.0 used=91.8GiB free=3.2GiB need_free=85.5GiB
 * holders=4242/VLLM::Worker_TP6/draining elapsed=12s timeout=120s`. The compact form (for a person
 * at a terminal) keeps what changes from line to line (used memory, holders, why, time) and leaves
 * out the rest (UUID, bus id, free memory and the thresholds, unattributed memory, the timeout) and
 * `unstable` next to `memory` (memory that drains is moving, of course). The full form (for
 * programs) also gives each size in bytes and each duration in milliseconds (`used_bytes=`,
 * `elapsed_ms=`), numbers a program can add up.
 */

import { formatBytes, formatDuration } from '../units';
import { holderLabel } from '../gate/failure-text';
import type { GpuEvaluation } from '../gate/wait';
import { shortBusId } from './bus-id';
import { logEvent, type LogEvent, type LogfmtValue } from './logfmt';

/** Context shared by every line of one poll. */
export interface LineContext {
  elapsedMs?: number;
  timeoutMs?: number;
  stableMs?: number;
  /** The terminal form: see above. */
  compact?: boolean;
}

/** The `key=value` pairs that describe one GPU. */
export function gpuPairs(gpu: GpuEvaluation, context: LineContext = {}): Array<[string, LogfmtValue]> {
  const memory = gpu.memory;
  const compact = context.compact === true;
  const pairs: Array<[string, LogfmtValue]> = [['gpu', gpu.index]];
  if (!compact) pairs.push(['uuid', gpu.uuid], ['bus', gpu.pciBusId === null ? null : shortBusId(gpu.pciBusId)]);
  /** A size as people read it, and in the full form also in bytes. */
  const size = (key: string, bytes: number): void => {
    pairs.push([key, formatBytes(bytes)]);
    if (!compact) pairs.push([`${key}_bytes`, bytes]);
  };
  if (memory !== null) {
    size('used', memory.usedBytes);
    if (!compact) size('free', memory.freeBytes);
  }
  if (!compact && gpu.neededFreeBytes !== null) size('need_free', gpu.neededFreeBytes);
  if (!compact && gpu.maxUsedBytes !== null) size('max_used', gpu.maxUsedBytes);
  if (gpu.holders.length > 0) pairs.push(['holders', gpu.holders.map(holderLabel).join(',')]);
  if (!compact && gpu.unattributedBytes !== null && gpu.unattributedBytes > 0 && gpu.holders.length === 0 && memory !== null && !gpu.ok) {
    size('unattributed', gpu.unattributedBytes);
  }
  const reasons = compact && gpu.reasons.includes('memory') ? gpu.reasons.filter((reason) => reason !== 'unstable') : gpu.reasons;
  if (!gpu.ok && reasons.length > 0) pairs.push(['why', reasons.join(',')]);
  if (gpu.reasons.includes('compute-mode')) pairs.push(['compute_mode', gpu.computeMode ?? null]);
  if (reasons.includes('unstable') && context.stableMs !== undefined) {
    pairs.push(['stable_for', `${formatDuration(gpu.stableForMs)}/${formatDuration(context.stableMs)}`]);
    if (!compact) pairs.push(['stable_for_ms', gpu.stableForMs], ['stable_ms', context.stableMs]);
  }
  if (gpu.error !== null) pairs.push(['error', gpu.error.code]);
  if (context.elapsedMs !== undefined) {
    pairs.push(['elapsed', formatDuration(roundElapsed(context.elapsedMs))]);
    if (!compact) pairs.push(['elapsed_ms', Math.round(context.elapsedMs)]);
  }
  if (!compact && context.timeoutMs !== undefined) pairs.push(['timeout', formatDuration(context.timeoutMs)], ['timeout_ms', context.timeoutMs]);
  return pairs;
}

/** The event `event` for one GPU (`event=waiting gpu=… …`). */
export function gpuLine(event: string, gpu: GpuEvaluation, context: LineContext = {}): LogEvent {
  return logEvent(event, gpuPairs(gpu, context));
}

/** Whole seconds once past 10 s (progress every few seconds reads better without decimals). */
function roundElapsed(ms: number): number {
  return ms >= 10_000 ? Math.round(ms / 1000) * 1000 : ms;
}
