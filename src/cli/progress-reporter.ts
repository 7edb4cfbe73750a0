/**
 * Rate-limited progress for a wait: a GPU's line is logged when its state changes (ok, reasons,
 * holders, error, used memory by a tenth of the total) or, while it is still not ready, every 10 s. Stale holders are logged once
 * each at warning priority. `-v` logs every poll at debug priority.
 */

import { formatBytes, formatDuration } from '../units';
import { holderLabel, holderName } from '../gate/failure-text';
import type { Holder } from '../gate/stale';
import { isStaleHolder } from '../gate/stale-holders';
import type { Evaluation, GpuEvaluation } from '../gate/wait';
import { describeOwner } from '../gate/owner-text';
import { logEvent } from './logfmt';
import { Priority, type Logger } from './logger';
import { gpuLine, type LineContext } from './progress-line';

/** One poll as the reporter sees it. */
export type PollView = Evaluation;

/** Reports progress; call {@link ProgressReporter.poll} once per evaluation. */
export class ProgressReporter {
  /** How often an unchanged, still-busy GPU is logged again. */
  static readonly HEARTBEAT_MS = 10_000;

  private readonly logger: Logger;
  private readonly timeoutMs: number | undefined;
  private readonly stableMs: number | undefined;
  private readonly onStatus: ((text: string) => void) | undefined;
  private readonly lastKey = new Map<number, string>();
  private readonly staleSeen = new Set<string>();
  private lastHeartbeatMs = 0;
  private lastStatus = '';
  /** The most recent poll, for the final summary after a timeout or a signal. */
  last: PollView | null = null;

  constructor(options: { logger: Logger; timeoutMs?: number; stableMs?: number; onStatus?: (text: string) => void }) {
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs;
    this.stableMs = options.stableMs;
    this.onStatus = options.onStatus;
  }

  /** Log what changed in this poll. */
  poll(view: PollView): void {
    const first = this.last === null;
    this.last = view;
    const context = this.context(view.elapsedMs);
    const heartbeat = view.elapsedMs - this.lastHeartbeatMs >= ProgressReporter.HEARTBEAT_MS;
    if (heartbeat) this.lastHeartbeatMs = view.elapsedMs;
    let changed = false;
    for (const gpu of view.devices) {
      this.reportStaleHolders(gpu.holders, gpu.index);
      const key = stateKey(gpu);
      const previous = this.lastKey.get(gpu.index);
      this.lastKey.set(gpu.index, key);
      if (this.logger.enabled(Priority.debug)) this.logger.debug(gpuLine('poll', gpu, context));
      if (gpu.ok) {
        // A GPU that is fine from the start is not news; one that became fine is.
        if (previous !== undefined && previous !== key) this.logger.info(gpuLine('ready', gpu, context));
        if (previous !== key) changed = true;
        continue;
      }
      if (previous !== key || heartbeat) {
        this.logger.info(gpuLine('waiting', gpu, context));
        changed = true;
      }
    }
    if (first || changed || heartbeat) this.publishStatus(view);
  }

  /** Log the last known state of every GPU that was not ready, at error priority (after a timeout or a signal). */
  logLastState(event: string, view: PollView | null = this.last): void {
    if (view === null) return;
    const context = this.context(view.elapsedMs);
    for (const gpu of view.devices) {
      if (!gpu.ok) this.logger.error(gpuLine(event, gpu, context));
    }
  }

  private context(elapsedMs: number): LineContext {
    return {
      elapsedMs,
      compact: this.logger.compact,
      ...(this.timeoutMs !== undefined ? { timeoutMs: this.timeoutMs } : {}),
      ...(this.stableMs !== undefined ? { stableMs: this.stableMs } : {}),
    };
  }

  /** Log stale holders (a stale class in holder-classes.ts) once each, at warning priority. */
  reportStaleHolders(holders: readonly Holder[], gpuIndex?: number): void {
    for (const holder of holders) {
      if (!isStaleHolder(holder)) continue;
      const id = `${holder.pid}/${holder.class}`;
      if (this.staleSeen.has(id)) continue;
      this.staleSeen.add(id);
      const gpus = gpuIndex !== undefined ? String(gpuIndex) : holder.gpus.join(',');
      this.logger.warning(logEvent('stale', [
        ['gpu', gpus],
        ['pid', holder.pid],
        ['class', holder.class],
        ['name', holderName(holder)],
        ['used', holder.usedBytes === null ? null : formatBytes(holder.usedBytes)],
        ['used_bytes', holder.usedBytes],
        ['state', holder.state],
        ['ppid', holder.ppid],
        ['unit', holder.unit],
        ['owner', describeOwner(holder.owner)],
        ['reason', holder.reason],
      ]));
    }
  }

  private publishStatus(view: PollView): void {
    if (this.onStatus === undefined) return;
    const text = statusText(view, this.timeoutMs);
    if (text === this.lastStatus) return;
    this.lastStatus = text;
    this.onStatus(text);
  }
}

/** How many busy GPUs `systemctl status` shows in full; the others are still named. */
const STATUS_DETAILED_GPUS = 3;

/**
 * A one-line summary for `systemctl status` (STATUS=). Busy GPUs come first, the one holding
 * the most memory (the likely culprit, e.g. an orphaned worker's GPU) leading; every busy GPU
 * is named, the first few in full.
 */
export function statusText(view: PollView, timeoutMs?: number): string {
  const busy = view.devices.filter((gpu) => !gpu.ok).sort((a, b) => usedOf(b) - usedOf(a) || a.index - b.index);
  const time = timeoutMs === undefined ? formatDuration(view.elapsedMs) : `${formatDuration(view.elapsedMs)}/${formatDuration(timeoutMs)}`;
  if (busy.length === 0) return `GPUs ${view.devices.map((gpu) => gpu.index).join(',')} free, waiting for stability (${time})`;
  const parts = busy.slice(0, STATUS_DETAILED_GPUS).map((gpu) => {
    const used = gpu.memory === null ? '?' : formatBytes(gpu.memory.usedBytes);
    const holders = gpu.holders.length === 0 ? '' : ` held by ${gpu.holders.slice(0, 2).map(holderLabel).join(' ')}${gpu.holders.length > 2 ? ` +${gpu.holders.length - 2}` : ''}`;
    return `GPU ${gpu.index} ${gpu.reasons.join('+')} ${used} used${holders}`;
  });
  const rest = busy.slice(STATUS_DETAILED_GPUS).map((gpu) => `${gpu.index}:${gpu.memory === null ? '?' : formatBytes(gpu.memory.usedBytes)}`);
  const more = rest.length > 0 ? `; also GPUs ${rest.join(',')}` : '';
  return `waiting: ${parts.join('; ')}${more} (${time})`;
}

function usedOf(gpu: GpuEvaluation): number {
  return gpu.memory?.usedBytes ?? -1;
}

function stateKey(gpu: GpuEvaluation): string {
  return [
    gpu.ok ? 'ok' : 'busy',
    // 'unstable' next to 'memory' says nothing new: the memory is moving because it drains.
    gpu.reasons.filter((reason) => reason !== 'unstable' || gpu.reasons.length === 1).sort().join('+'),
    gpu.holders.map(holderLabel).sort().join(','),
    gpu.error?.code ?? '',
    // Memory moving by a tenth of the GPU is news too (a drain shows as it happens).
    gpu.memory === null || gpu.memory.totalBytes <= 0 ? '' : String(Math.floor((gpu.memory.usedBytes / gpu.memory.totalBytes) * 10)),
  ].join('|');
}
