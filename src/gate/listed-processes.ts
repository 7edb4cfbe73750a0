/**
 * What NVML lists on the selected GPUs, merged by pid, and what a holder holds on one GPU.
 */
import type { GpuDevice } from '../types';
import type { GpuUsage, Holder } from './holder-report';

/** What NVML says about one pid across the selected GPUs. */
export interface ListedProcess {
  pid: number;
  gpus: number[];
  /** The sum over `gpus`; null when NVML did not say for one of them. */
  usedBytes: number | null;
  /** Per GPU, in the order of `gpus`. */
  usedBytesPerGpu: GpuUsage[];
}

function addBytes(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : a + b;
}

/** Merges the process lists of the selected devices by pid, keeping what it holds on each GPU. */
export function listedProcesses(devices: GpuDevice[]): ListedProcess[] {
  const byPid = new Map<number, ListedProcess>();
  for (const device of devices) {
    for (const proc of device.processes ?? []) {
      const entry = byPid.get(proc.pid) ?? { pid: proc.pid, gpus: [], usedBytes: 0, usedBytesPerGpu: [] };
      const onGpu = entry.usedBytesPerGpu.find((usage) => usage.gpu === device.index);
      if (onGpu === undefined) {
        entry.gpus.push(device.index);
        entry.usedBytesPerGpu.push({ gpu: device.index, usedBytes: proc.usedBytes });
      } else {
        onGpu.usedBytes = addBytes(onGpu.usedBytes, proc.usedBytes);
      }
      entry.usedBytes = addBytes(entry.usedBytes, proc.usedBytes);
      byPid.set(proc.pid, entry);
    }
  }
  return [...byPid.values()].sort((a, b) => a.pid - b.pid);
}

/**
 * What `holder` holds on GPU `gpu` alone (a holder on several GPUs is shown under each with that
 * GPU's share, not its total); null when NVML did not say or it is not listed there.
 */
export function usedBytesOn(holder: Pick<Holder, 'usedBytesPerGpu'>, gpu: number): number | null {
  return holder.usedBytesPerGpu.find((usage) => usage.gpu === gpu)?.usedBytes ?? null;
}
