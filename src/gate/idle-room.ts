/**
 * What a GPU can offer a gate when nothing runs on it: NVML's total less the driver's reserved
 * memory and the baseline an idle GPU still shows as used (driver, persistence daemon: a few
 * hundred MiB up to 1 GiB, see docs/systemd.md). A gate asking more than that can never pass, so
 * every start of its unit fails even on an idle GPU; `gpugate systemd` never writes one and
 * `gpugate doctor --unit` fails one.
 */
import type { GpuDevice } from '../types';
import { minFreeBytes, type MinFree } from './criteria';
import type { EngineReading } from './engine-view';

/** The most an idle GPU was seen to use beyond reserved memory: counted as taken. */
export const IDLE_BASELINE_BYTES = 1024 ** 3;

/** Reserved memory assumed where NVML reports none (the v1 query): above every size seen (640 MiB on a 96 GiB card). */
export const UNKNOWN_RESERVED_BYTES = 1024 ** 3;

/** One GPU's size, as NVML reports it. */
export interface GpuSize {
  index: number;
  totalBytes: number;
  /** Null when the driver reports none (the v1 memory query). */
  reservedBytes: number | null;
  /** NVML's device name: an engine's minFree estimates the CUDA context by it (absent: the default size). */
  name?: string | null;
}

/** The GPU as an engine's minFree reads it. */
function readingOf(gpu: GpuSize): EngineReading {
  return { name: gpu.name ?? null, totalBytes: gpu.totalBytes, reservedBytes: gpu.reservedBytes };
}

/** Free memory an idle GPU of this size offers. */
export function idleFreeBytes(gpu: GpuSize): number {
  return gpu.totalBytes - (gpu.reservedBytes ?? UNKNOWN_RESERVED_BYTES) - IDLE_BASELINE_BYTES;
}

/** A GPU on which a gate can never pass: what it needs and what the idle GPU offers. */
export interface IdleShortfall {
  gpu: GpuSize;
  neededBytes: number;
  idleFreeBytes: number;
}

/** The GPU short by most for `minFree` + `marginBytes`, or null when the gate can pass on every one of `gpus` once idle. */
export function idleShortfall(minFree: MinFree, marginBytes: number, gpus: readonly GpuSize[]): IdleShortfall | null {
  let worst: IdleShortfall | null = null;
  for (const gpu of gpus) {
    const neededBytes = minFreeBytes(minFree, marginBytes, readingOf(gpu));
    const offered = idleFreeBytes(gpu);
    if (neededBytes > offered && (worst === null || neededBytes - offered > worst.neededBytes - worst.idleFreeBytes)) {
      worst = { gpu, neededBytes, idleFreeBytes: offered };
    }
  }
  return worst;
}

/**
 * The largest margin, in whole MiB, with which `minFree` (a bare number: a fraction of total)
 * still passes on every one of `gpus` once idle; negative when even no margin does (minFree
 * alone is more than an idle GPU offers).
 */
export function largestIdleMarginBytes(minFree: number | MinFree, gpus: readonly GpuSize[]): number {
  const mib = 1024 ** 2;
  const criterion = typeof minFree === 'number' ? { fraction: minFree } : minFree;
  const room = Math.min(...gpus.map((gpu) => idleFreeBytes(gpu) - minFreeBytes(criterion, 0, readingOf(gpu))));
  return Math.floor(room / mib) * mib;
}

/** The sizes of the GPUs whose memory NVML could read. */
export function gpuSizesOf(devices: readonly GpuDevice[]): GpuSize[] {
  return devices.flatMap((d) => (d.memory === null ? [] : [{ index: d.index, totalBytes: d.memory.totalBytes, reservedBytes: d.memory.reservedBytes, name: d.name }]));
}
