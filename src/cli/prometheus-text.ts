/**
 * The node_exporter textfile format (Prometheus exposition text) for `status` and `holders`:
 * per GPU memory and process counts, holders by class, unattributed memory, leaked /dev/shm.
 * Write it to a temporary file and rename it into the collector's directory.
 */

import type { GpuDevice, LibraryInfo } from '../types';
import type { HolderView, ShmEntryView } from './gpu-view';

/** What the exposition is made from. */
export interface PrometheusInput {
  devices: readonly GpuDevice[];
  library: LibraryInfo | null;
  /** Classified holders (from `holders`, or `status` when it scanned /proc). */
  holders?: readonly HolderView[];
  /** Unattributed memory per GPU index. */
  unattributedBytes?: ReadonlyMap<number, number | null>;
  shm?: { leaked: readonly ShmEntryView[]; tmpfsFreeBytes: number | null; tmpfsTotalBytes: number | null } | null;
  /** Seconds since the epoch of the sample. */
  timestampSeconds: number;
}

type Labels = Record<string, string | number>;

/** Escape a label value (backslash, double quote, newline). */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

class Exposition {
  private readonly lines: string[] = [];
  private readonly declared = new Set<string>();

  metric(name: string, help: string, type: 'gauge' | 'counter', labels: Labels, value: number): void {
    if (!this.declared.has(name)) {
      this.declared.add(name);
      this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    }
    const rendered = Object.entries(labels).map(([key, v]) => `${key}="${escapeLabelValue(String(v))}"`).join(',');
    this.lines.push(`${name}${rendered === '' ? '' : `{${rendered}}`} ${formatValue(value)}`);
  }

  text(): string {
    return `${this.lines.join('\n')}\n`;
  }
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/** Holder classes always exported (as 0 when absent), so alert rules see a series. */
const HOLDER_CLASSES = ['active', 'draining', 'zombie', 'zombie_live_threads', 'gone', 'unverifiable', 'leftover', 'orphan', 'foreign'];

/** Render the exposition text. */
export function prometheusText(input: PrometheusInput): string {
  const out = new Exposition();
  const library = input.library;
  out.metric('gpugate_nvml_info', 'NVML library and driver in use (value is always 1).', 'gauge', {
    driver_version: library?.driverVersion ?? '',
    nvml_version: library?.nvmlVersion ?? '',
    cuda_driver_version: library?.cudaDriverVersion ?? '',
  }, 1);
  out.metric('gpugate_sample_timestamp_seconds', 'When this sample was taken.', 'gauge', {}, input.timestampSeconds);
  for (const device of input.devices) {
    const id = { gpu: device.index, uuid: device.uuid };
    out.metric('gpugate_gpu_info', 'GPU identity (value is always 1).', 'gauge', { ...id, pci_bus_id: device.pciBusId, name: device.name }, 1);
    out.metric('gpugate_gpu_up', 'Whether NVML could read the GPU (0 when lost or failing).', 'gauge', id, device.error === null ? 1 : 0);
    const memory = device.memory;
    if (memory !== null) {
      out.metric('gpugate_gpu_memory_total_bytes', 'Total GPU memory.', 'gauge', id, memory.totalBytes);
      out.metric('gpugate_gpu_memory_used_bytes', 'GPU memory in use (v2: excluding driver-reserved memory).', 'gauge', id, memory.usedBytes);
      out.metric('gpugate_gpu_memory_free_bytes', 'GPU memory free.', 'gauge', id, memory.freeBytes);
      if (memory.reservedBytes !== null) {
        out.metric('gpugate_gpu_memory_reserved_bytes', 'GPU memory reserved by the driver.', 'gauge', id, memory.reservedBytes);
      }
    }
    if (Array.isArray(device.processes)) {
      out.metric('gpugate_gpu_processes', 'Processes NVML lists on the GPU.', 'gauge', id, device.processes.length);
    }
  }
  if (input.holders !== undefined) {
    for (const device of input.devices) {
      const counts = new Map(HOLDER_CLASSES.map((name) => [name, 0]));
      for (const holder of input.holders) {
        if (holder.gpus === undefined || holder.gpus.includes(device.index)) counts.set(holder.class, (counts.get(holder.class) ?? 0) + 1);
      }
      for (const [name, count] of counts) {
        out.metric('gpugate_gpu_holders', 'Processes holding the GPU, by class (leftover/orphan/zombie are stale).', 'gauge', { gpu: device.index, uuid: device.uuid, class: name }, count);
      }
    }
  }
  if (input.unattributedBytes !== undefined) {
    for (const device of input.devices) {
      const bytes = input.unattributedBytes.get(device.index);
      if (bytes === undefined || bytes === null) continue;
      out.metric('gpugate_gpu_unattributed_bytes', 'Used memory that no listed process accounts for (teardown or hidden holders).', 'gauge', { gpu: device.index, uuid: device.uuid }, bytes);
    }
  }
  const shm = input.shm;
  if (shm !== undefined && shm !== null) {
    out.metric('gpugate_shm_leaked_files', 'Engine /dev/shm files that no live process references.', 'gauge', {}, shm.leaked.length);
    const leakedBytes = shm.leaked.reduce((sum, entry) => sum + (entry.allocatedBytes ?? entry.sizeBytes ?? 0), 0);
    out.metric('gpugate_shm_leaked_bytes', 'Memory those files take on tmpfs.', 'gauge', {}, leakedBytes);
    if (shm.tmpfsFreeBytes !== null) out.metric('gpugate_shm_free_bytes', 'Free space on /dev/shm.', 'gauge', {}, shm.tmpfsFreeBytes);
    if (shm.tmpfsTotalBytes !== null) out.metric('gpugate_shm_size_bytes', 'Size of /dev/shm.', 'gauge', {}, shm.tmpfsTotalBytes);
  }
  return out.text();
}
