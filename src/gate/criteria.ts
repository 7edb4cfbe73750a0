/**
 * The per-GPU evaluation policy of a wait: which memory thresholds apply (minFree as vLLM checks
 * it, maxUsed with its 1 GiB default, noProcesses, ignored processes), whether they are possible
 * at all, and how long free memory has stayed within the stability tolerance.
 */
import { ConfigError } from '../config-error';
import type { GpuMemory } from '../types';
import { formatBytes, parseSizeOrFraction, type SizeOrFraction } from '../units';
import { UsageError } from '../usage-error';
import { gateDefaults } from './gate-defaults';
import { LIVE_HOLDER_CLASSES, RELEASING_HOLDER_CLASSES, type HolderClass } from './holder-classes';
import { checkEngineMinFree, engineNeededFreeBytes, isEngineMinFree, type EngineMinFree, type EngineReading } from './engine-view';

/** minFree: a size, a fraction of NVML's total, or an engine's own start check (src/gate/engine-view.ts). */
export type MinFree = SizeOrFraction | EngineMinFree;

/** minFree as a caller may write it: the criterion, a fraction (`0.9`), or the CLI's text (`'0.9'`, `'90%'`, `'86GiB'`). */
export type MinFreeInput = MinFree | number | string;

/**
 * minFree written as a number or text, read in the grammar of the CLI's --min-free: a number is a
 * fraction of total memory (above 1 a UsageError, as `--min-free 2` is: a size needs a unit), text
 * is parsed by parseSizeOrFraction. Whether the value can ever be met is resolveCriteria's to say.
 */
export function minFreeOf(value: MinFreeInput): MinFree {
  if (typeof value === 'object') return value;
  const text = String(value);
  try {
    return typeof value === 'number' && !(value > 1) ? { fraction: value } : parseSizeOrFraction(text);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    throw new UsageError(error.input, error.expected, `option minFree ${typeof value === 'number' ? text : JSON.stringify(text)}: ${error.message}`, { cause: error });
  }
}

/** One GiB: the default maxUsed when no criterion is given. */
export const DEFAULT_MAX_USED_BYTES = 1024 ** 3;
/** 256 MiB: the default stability tolerance (gateDefaults.stableToleranceBytes). */
export const DEFAULT_STABLE_TOLERANCE_BYTES = gateDefaults.stableToleranceBytes;
/**
 * The NVIDIA daemons ignored unless ignoreDefaults is false, by executable name: a holder is
 * ignored as one only when it proves to be it (root, and that executable; see ignored-daemons.ts).
 */
export const DEFAULT_IGNORED_NAMES: readonly string[] = ['nvidia-persistenced', 'nv-hostengine', 'dcgm-exporter'];

/** The criteria as given by the caller. */
export interface CriteriaOptions {
  minFree?: MinFreeInput;
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
  minFree: MinFree | null;
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

/** The fractions each memory criterion accepts, and why the ends are in or out. */
const FRACTION_RANGES = {
  // No GPU ever has all of its memory free (the driver reserves some): 1 could never be met.
  minFree: { low: 'above', high: 'below', text: 'above 0 and below 1 (a GPU never has all of its memory free: the driver reserves some)' },
  maxUsed: { low: 'from', high: 'through', text: 'from 0 through 1' },
} as const;

function checkFraction(option: keyof typeof FRACTION_RANGES, value: SizeOrFraction): void {
  if ('fraction' in value) {
    const f = value.fraction;
    const range = FRACTION_RANGES[option];
    const fits = Number.isFinite(f) && (range.low === 'above' ? f > 0 : f >= 0) && (range.high === 'below' ? f < 1 : f <= 1);
    if (!fits) throw new ConfigError(option, `${option} fraction ${f} is out of range: expected ${range.text}`);
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
  const minFree = options.minFree === undefined ? undefined : minFreeOf(options.minFree);
  if (minFree) {
    if (isEngineMinFree(minFree)) checkEngineMinFree(minFree);
    else checkFraction('minFree', minFree);
  }
  if (options.maxUsed) checkFraction('maxUsed', options.maxUsed);
  const stableMs = options.stableMs ?? 0;
  checkNonNegative('stableMs', stableMs);
  const stableToleranceBytes = options.stableToleranceBytes ?? DEFAULT_STABLE_TOLERANCE_BYTES;
  checkNonNegative('stableToleranceBytes', stableToleranceBytes);
  const noCriterion = !minFree && !options.maxUsed && !options.noProcesses;
  const ignorePids = new Set<number>([selfPid]);
  const ignoreNames = new Set<string>();
  for (const entry of options.ignore ?? []) {
    if (typeof entry === 'number') ignorePids.add(entry);
    else if (/^\d+$/.test(entry.trim())) ignorePids.add(Number(entry.trim()));
    else if (entry.trim() !== '') ignoreNames.add(entry.trim());
  }
  return {
    minFree: minFree ?? null,
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

/** A GPU given by its total alone: no name (the default context size), reserved unknown. */
function readingOf(size: number | EngineReading): EngineReading {
  return typeof size === 'number' ? { name: '', totalBytes: size, reservedBytes: null } : size;
}

/**
 * The NVML free memory `minFree` plus `marginBytes` asks of `gpu`: ceil(total × fraction) + margin,
 * bytes + margin, or for an engine its own check moved to NVML's figures (see engine-view.ts).
 */
export function minFreeBytes(minFree: MinFree, marginBytes: number, size: number | EngineReading): number {
  const gpu = readingOf(size);
  if (isEngineMinFree(minFree)) return engineNeededFreeBytes(minFree, marginBytes, gpu);
  return ('fraction' in minFree ? Math.ceil(gpu.totalBytes * minFree.fraction) : minFree.bytes) + marginBytes;
}

/**
 * Free memory a GPU needs (see minFreeBytes). Null when minFree is not set. Throws ConfigError
 * when the need exceeds the total: waiting could never succeed.
 */
export function neededFreeBytes(criteria: Criteria, size: number | EngineReading, label = 'GPU'): number | null {
  if (!criteria.minFree) return null;
  const gpu = readingOf(size);
  const totalBytes = gpu.totalBytes;
  const needed = minFreeBytes(criteria.minFree, criteria.marginBytes, gpu);
  if (needed > totalBytes) {
    throw new ConfigError(
      'minFree',
      `${label}: minFree needs ${formatBytes(needed)} (${needed} bytes${criteria.marginBytes > 0 ? `, margin ${formatBytes(criteria.marginBytes)} included` : ''}${isEngineMinFree(criteria.minFree) ? ', the CUDA context included' : ''}) free but the GPU has only ${formatBytes(totalBytes)} (${totalBytes} bytes) in total`,
    );
  }
  return needed;
}

/** 64 MiB: the least slack allowed between free + used (+ reserved) and total. */
export const MEMORY_SUM_TOLERANCE_MIN_BYTES = 64 * 1024 ** 2;
/** 1 %: the slack allowed between free + used (+ reserved) and total, as a fraction of total. */
export const MEMORY_SUM_TOLERANCE_FRACTION = 0.01;

/** The slack allowed between a memory reading's sum and its total: max(64 MiB, 1 % of total). */
function memorySumTolerance(totalBytes: number): number {
  return Math.max(MEMORY_SUM_TOLERANCE_MIN_BYTES, Math.ceil(totalBytes * MEMORY_SUM_TOLERANCE_FRACTION));
}

/**
 * How far a memory reading's sums are from its total, for each way of counting reserved memory.
 * The v1 query's used includes reserved (and reserved is unknown). The v2 query's used excludes
 * reserved on current drivers (free + used + reserved = total), but NVIDIA's R525 reference says
 * it includes it (free + used = total): both exist in the wild, so both are consistent.
 */
function sumErrors(memory: GpuMemory): { excluded: number; included: number; tolerance: number } {
  const { totalBytes, freeBytes, usedBytes } = memory;
  const tolerance = memorySumTolerance(totalBytes);
  const included = Math.abs(freeBytes + usedBytes - totalBytes);
  if (memory.source === 'v1') return { excluded: Number.POSITIVE_INFINITY, included, tolerance };
  return { excluded: Math.abs(freeBytes + usedBytes + (memory.reservedBytes ?? 0) - totalBytes), included, tolerance };
}

/**
 * Why a memory reading cannot be believed, or null when it can. One NVML memory query returns
 * its numbers together, so they must add up: free and used each at most total, and for v1
 * free + used, for v2 either free + used + reserved (used excludes reserved) or free + used
 * (used includes it), equal to total within max(64 MiB, 1 % of total). Anything else means a
 * struct read with the wrong layout or a driver fault, and no free-memory verdict drawn from it
 * can be trusted.
 */
export function implausibleMemory(memory: GpuMemory): string | null {
  const { totalBytes, freeBytes, usedBytes } = memory;
  const reservedBytes = memory.source === 'v2' ? (memory.reservedBytes ?? 0) : 0;
  const numbers = `total ${formatBytes(totalBytes)} (${totalBytes} bytes), free ${formatBytes(freeBytes)} (${freeBytes}), used ${formatBytes(usedBytes)} (${usedBytes})${memory.source === 'v2' ? `, reserved ${formatBytes(reservedBytes)} (${reservedBytes})` : ''}`;
  const values = [totalBytes, freeBytes, usedBytes, reservedBytes];
  if (values.some((value) => !Number.isFinite(value) || value < 0)) return `${numbers}: a value is not a byte count`;
  if (freeBytes > totalBytes) return `${numbers}: free exceeds total`;
  if (usedBytes > totalBytes) return `${numbers}: used exceeds total`;
  const errors = sumErrors(memory);
  if (Math.min(errors.excluded, errors.included) <= errors.tolerance) return null;
  const away = `more than ${formatBytes(errors.tolerance)} away from total`;
  if (memory.source === 'v1') return `${numbers}: free + used = ${formatBytes(freeBytes + usedBytes)}, ${away}`;
  const withReserved = `free + used + reserved = ${formatBytes(freeBytes + usedBytes + reservedBytes)}`;
  if (reservedBytes === 0) return `${numbers}: ${withReserved}, ${away}`;
  return `${numbers}: neither ${withReserved} (used excluding reserved) nor free + used = ${formatBytes(freeBytes + usedBytes)} (used including it) is within ${formatBytes(errors.tolerance)} of total`;
}

/**
 * Whether the reading's used figure includes the driver's reserved memory: true for v1; for v2,
 * the way of counting whose sum comes closer to total (the two differ by reserved, hundreds of
 * MiB, while a real driver's rounding is a few MiB): false for current drivers, true for
 * NVIDIA's R525 reference semantics. Null when the reading cannot tell (no reserved memory, an
 * exact tie) or fits neither way (implausible).
 */
export function reservedInUsed(memory: GpuMemory): boolean | null {
  if (memory.source === 'v1') return true;
  const errors = sumErrors(memory);
  if (Math.min(errors.excluded, errors.included) > errors.tolerance || errors.excluded === errors.included) return null;
  return errors.included < errors.excluded;
}

/**
 * Memory in use apart from the driver's reservation, as a v2 reading on a current driver reports
 * it: used minus reserved where the reading counts reserved in used. What maxUsed, the settled
 * check and the unattributed figure compare, so that a driver with the R525 semantics is judged
 * like any other. A v1 reading (reserved unknown) is taken as is.
 */
export function usedExcludingReserved(memory: GpuMemory): number {
  if (memory.source === 'v2' && memory.reservedBytes !== null && reservedInUsed(memory) === true) {
    return Math.max(0, memory.usedBytes - memory.reservedBytes);
  }
  return memory.usedBytes;
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

/**
 * The holders whose memory is still to come back by itself (a releasing class in
 * holder-classes.ts: a process exiting or already gone from /proc whose context the driver is
 * still tearing down). Real drivers give such memory back in one step (the figure sits at the
 * full allocation, then drops to the baseline in one poll: 0.4-0.8 s for device memory, 16-26 s
 * with a large pinned host pool), so memory that holds still proves nothing while one is listed.
 */
export function releasingHolders<H extends { class: HolderClass }>(holders: readonly H[]): H[] {
  return holders.filter((holder) => RELEASING_HOLDER_CLASSES.has(holder.class));
}

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
  holders: ReadonlyArray<{ class: HolderClass; usedBytes: number | null }>,
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
