/**
 * The per-GPU evaluation policy of a wait: which memory thresholds apply (minFree as vLLM checks
 * it, maxUsed with its 1 GiB default, noProcesses, ignored processes), whether they are possible
 * at all, and how long free memory has stayed within the stability tolerance.
 */
import { ConfigError } from '../config-error';
import type { GpuMemory } from '../types';
import type { SizeOrFraction } from '../units';
import { formatBytes } from '../units';

/** One GiB: the default maxUsed when no criterion is given. */
export const DEFAULT_MAX_USED_BYTES = 1024 ** 3;
/** 256 MiB: the default stability tolerance. */
export const DEFAULT_STABLE_TOLERANCE_BYTES = 256 * 1024 ** 2;
/**
 * The NVIDIA daemons ignored unless ignoreDefaults is false, by executable name: a holder is
 * ignored as one only when it proves to be it (root, and that executable; see ignored-daemons.ts).
 */
export const DEFAULT_IGNORED_NAMES: readonly string[] = ['nvidia-persistenced', 'nv-hostengine', 'dcgm-exporter'];

/** The criteria as given by the caller. */
export interface CriteriaOptions {
  minFree?: SizeOrFraction;
  marginBytes?: number;
  maxUsed?: SizeOrFraction;
  noProcesses?: boolean;
  ignore?: (number | string)[];
  ignoreDefaults?: boolean;
  stableMs?: number;
  stableToleranceBytes?: number;
}

/** The criteria after defaults and validation. */
export interface Criteria {
  minFree: SizeOrFraction | null;
  marginBytes: number;
  maxUsed: SizeOrFraction | null;
  noProcesses: boolean;
  ignorePids: Set<number>;
  /** Names from `ignore`, matched against /proc/PID/comm as given. */
  ignoreNames: Set<string>;
  /** The daemons (executable names) ignored when a holder proves to be one of them. */
  ignoreDaemons: Set<string>;
  stableMs: number;
  stableToleranceBytes: number;
}

function checkFraction(option: string, value: SizeOrFraction, allowZero: boolean): void {
  if ('fraction' in value) {
    const f = value.fraction;
    if (!Number.isFinite(f) || f > 1 || f < 0 || (!allowZero && f === 0)) {
      throw new ConfigError(option, `${option} fraction ${f} is outside ${allowZero ? '0..1' : '(0, 1]'}`);
    }
  } else if (!Number.isSafeInteger(value.bytes) || value.bytes < 0) {
    throw new ConfigError(option, `${option} ${value.bytes} is not a byte count (a whole number >= 0)`);
  }
}

function checkNonNegative(option: string, value: number): void {
  if (!Number.isFinite(value) || value < 0) throw new ConfigError(option, `${option} ${value} must be a number >= 0`);
}

/**
 * Applies defaults (maxUsed 1 GiB when no criterion is given; the caller's own pid and, unless
 * ignoreDefaults is false, the genuine NVIDIA daemons are ignored) and rejects impossible values
 * with ConfigError.
 */
export function resolveCriteria(options: CriteriaOptions, selfPid: number = process.pid): Criteria {
  const marginBytes = options.marginBytes ?? 0;
  checkNonNegative('marginBytes', marginBytes);
  if (options.minFree) checkFraction('minFree', options.minFree, false);
  if (options.maxUsed) checkFraction('maxUsed', options.maxUsed, true);
  const stableMs = options.stableMs ?? 0;
  checkNonNegative('stableMs', stableMs);
  const stableToleranceBytes = options.stableToleranceBytes ?? DEFAULT_STABLE_TOLERANCE_BYTES;
  checkNonNegative('stableToleranceBytes', stableToleranceBytes);
  const noCriterion = !options.minFree && !options.maxUsed && !options.noProcesses;
  const ignorePids = new Set<number>([selfPid]);
  const ignoreNames = new Set<string>();
  for (const entry of options.ignore ?? []) {
    if (typeof entry === 'number') ignorePids.add(entry);
    else if (/^\d+$/.test(entry.trim())) ignorePids.add(Number(entry.trim()));
    else if (entry.trim() !== '') ignoreNames.add(entry.trim());
  }
  return {
    minFree: options.minFree ?? null,
    marginBytes,
    maxUsed: options.maxUsed ?? (noCriterion ? { bytes: DEFAULT_MAX_USED_BYTES } : null),
    noProcesses: options.noProcesses ?? false,
    ignorePids,
    ignoreNames,
    ignoreDaemons: new Set(options.ignoreDefaults === false ? [] : DEFAULT_IGNORED_NAMES),
    stableMs,
    stableToleranceBytes,
  };
}

/**
 * Free memory a GPU of `totalBytes` needs: ceil(total × fraction) + margin (vLLM's own start
 * check is free >= ceil(total × utilization)), or bytes + margin. Null when minFree is not set.
 * Throws ConfigError when the need exceeds the total: waiting could never succeed.
 */
export function neededFreeBytes(criteria: Criteria, totalBytes: number, label = 'GPU'): number | null {
  if (!criteria.minFree) return null;
  const base = 'fraction' in criteria.minFree ? Math.ceil(totalBytes * criteria.minFree.fraction) : criteria.minFree.bytes;
  const needed = base + criteria.marginBytes;
  if (needed > totalBytes) {
    throw new ConfigError(
      'minFree',
      `${label}: minFree needs ${formatBytes(needed)} (${needed} bytes${criteria.marginBytes > 0 ? `, margin ${formatBytes(criteria.marginBytes)} included` : ''}) free but the GPU has only ${formatBytes(totalBytes)} (${totalBytes} bytes) in total`,
    );
  }
  return needed;
}

/** 64 MiB: the least slack allowed between free + used (+ reserved) and total. */
export const MEMORY_SUM_TOLERANCE_MIN_BYTES = 64 * 1024 ** 2;
/** 1 %: the slack allowed between free + used (+ reserved) and total, as a fraction of total. */
export const MEMORY_SUM_TOLERANCE_FRACTION = 0.01;

/**
 * Why a memory reading cannot be believed, or null when it can. One NVML memory query returns
 * its numbers together, so they must add up: free and used each at most total, and free + used
 * (+ reserved for the v2 query, whose used excludes it) equal to total within
 * max(64 MiB, 1 % of total). Anything else means a struct read with the wrong layout or a driver
 * fault, and no free-memory verdict drawn from it can be trusted.
 */
export function implausibleMemory(memory: GpuMemory): string | null {
  const { totalBytes, freeBytes, usedBytes } = memory;
  const reservedBytes = memory.source === 'v2' ? (memory.reservedBytes ?? 0) : 0;
  const numbers = `total ${formatBytes(totalBytes)} (${totalBytes} bytes), free ${formatBytes(freeBytes)} (${freeBytes}), used ${formatBytes(usedBytes)} (${usedBytes})${memory.source === 'v2' ? `, reserved ${formatBytes(reservedBytes)} (${reservedBytes})` : ''}`;
  const values = [totalBytes, freeBytes, usedBytes, reservedBytes];
  if (values.some((value) => !Number.isFinite(value) || value < 0)) return `${numbers}: a value is not a byte count`;
  if (freeBytes > totalBytes) return `${numbers}: free exceeds total`;
  if (usedBytes > totalBytes) return `${numbers}: used exceeds total`;
  const tolerance = Math.max(MEMORY_SUM_TOLERANCE_MIN_BYTES, Math.ceil(totalBytes * MEMORY_SUM_TOLERANCE_FRACTION));
  const sum = freeBytes + usedBytes + reservedBytes;
  if (Math.abs(sum - totalBytes) > tolerance) {
    const terms = memory.source === 'v2' ? 'free + used + reserved' : 'free + used';
    return `${numbers}: ${terms} = ${formatBytes(sum)}, more than ${formatBytes(tolerance)} away from total`;
  }
  return null;
}

/** The most memory a GPU of `totalBytes` may have in use: floor(total × fraction) or bytes; null when not set. */
export function maxUsedBytes(criteria: Criteria, totalBytes: number): number | null {
  if (!criteria.maxUsed) return null;
  return 'fraction' in criteria.maxUsed ? Math.floor(totalBytes * criteria.maxUsed.fraction) : criteria.maxUsed.bytes;
}

/**
 * Tracks, per key (a GPU), how long free memory has stayed within the tolerance. The window
 * restarts at the current sample whenever the spread of free memory since its start exceeds the
 * tolerance. Times are monotonic milliseconds supplied by the caller.
 */
export class StabilityTracker {
  private readonly windows = new Map<string, { startMs: number; minFree: number; maxFree: number }>();

  constructor(private readonly toleranceBytes: number) {}

  /** Records a sample and returns how long (ms) free memory has been stable, 0 after a move. */
  update(key: string, freeBytes: number, nowMs: number): number {
    const window = this.windows.get(key);
    if (!window) {
      this.windows.set(key, { startMs: nowMs, minFree: freeBytes, maxFree: freeBytes });
      return 0;
    }
    const minFree = Math.min(window.minFree, freeBytes);
    const maxFree = Math.max(window.maxFree, freeBytes);
    if (maxFree - minFree > this.toleranceBytes) {
      this.windows.set(key, { startMs: nowMs, minFree: freeBytes, maxFree: freeBytes });
      return 0;
    }
    window.minFree = minFree;
    window.maxFree = maxFree;
    return nowMs - window.startMs;
  }

  /** Forgets a key (e.g. when its memory became unreadable). */
  reset(key: string): void {
    this.windows.delete(key);
  }
}

/** Holder classes of a live process that is not going away by itself (see stale.ts). */
const LIVE_HOLDER_CLASSES: ReadonlySet<string> = new Set(['active', 'foreign']);

/**
 * True when free memory can no longer grow by itself, so a stability window has nothing left to
 * wait for: every listed holder is a live process that is not going away (no dying, draining,
 * gone, orphaned or leftover holder whose memory is still to come back), and the used memory not
 * accounted for by the listed holders is within the tolerance (no memory of a process already
 * off the list still draining). vLLM's concern, free memory growing during its startup
 * profiling, is then ruled out at once, and a wait need not sit out `stableMs` after the last
 * drain. A live holder may of course free memory later; no window can foresee that either.
 * Unknown figures (a holder's memory not available) never count as settled.
 */
export function nothingLeftToFree(
  usedBytes: number,
  holders: ReadonlyArray<{ class: string; usedBytes: number | null }>,
  ignoredHolderBytes: ReadonlyArray<number | null>,
  toleranceBytes: number,
): boolean {
  let accounted = 0;
  for (const holder of holders) {
    if (holder.usedBytes === null || !LIVE_HOLDER_CLASSES.has(holder.class)) return false;
    accounted += holder.usedBytes;
  }
  // Ignored holders (the NVIDIA daemons) stay: their memory is accounted for, whatever their class.
  for (const bytes of ignoredHolderBytes) {
    if (bytes === null) return false;
    accounted += bytes;
  }
  return usedBytes - accounted <= toleranceBytes;
}
