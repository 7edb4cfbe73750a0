/**
 * The node_exporter textfile format (Prometheus exposition text) for `status` and `holders`:
 * whether NVML could be read, per GPU identity, memory, utilisation, temperature, power, process
 * counts, holders by class, unattributed memory, leaked /dev/shm. Each metric is one family: its
 * HELP and TYPE once, then every GPU's sample, so the Prometheus and OpenMetrics parsers both read
 * it; it ends with `# EOF` (OpenMetrics' end marker, a comment to the Prometheus parser), so a
 * truncated file is recognisable. A failure is output too (`gpugate_up 0` with the error as labels):
 * written over an older file, it replaces numbers that are no longer true.
 */

import type { GpuDevice, LibraryInfo } from '../types';
import { HOLDER_CLASSES, STALE_HOLDER_CLASSES } from '../gate/holder-classes';
import type { Holder } from '../gate/stale';
import type { ShmEntry } from '../host/shm';

/** What the exposition is made from. */
export interface PrometheusInput {
  devices: readonly GpuDevice[];
  library: LibraryInfo | null;
  /** Classified holders (from `holders`, or `status` when it scanned /proc). */
  holders?: readonly Holder[];
  /** Unattributed memory per GPU index. */
  unattributedBytes?: ReadonlyMap<number, number | null>;
  shm?: { leaked: readonly ShmEntry[]; tmpfsFreeBytes: number | null; tmpfsTotalBytes: number | null } | null;
  /** Seconds since the epoch of the sample. */
  timestampSeconds: number;
  /** UUIDs recorded earlier per NVML index: the label of a GPU that NVML can no longer identify. */
  lastKnownUuids?: ReadonlyMap<number, string>;
}

/** Why gpugate could not read NVML at all. */
export interface PrometheusFailure {
  /** e.g. NVML_ERROR_DRIVER_NOT_LOADED, GPUGATE_TIMEOUT; null when the error has no code. */
  code: string | null;
  message: string;
  timestampSeconds: number;
}

type Labels = Record<string, string | number>;

/** Escape a label value (backslash, double quote, newline). */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

interface Family {
  help: string;
  samples: string[];
}

/** Families in the order first seen, each with its samples. */
class Exposition {
  private readonly families = new Map<string, Family>();

  gauge(name: string, help: string, labels: Labels, value: number): void {
    let family = this.families.get(name);
    if (family === undefined) {
      family = { help, samples: [] };
      this.families.set(name, family);
    }
    const rendered = Object.entries(labels).map(([key, v]) => `${key}="${escapeLabelValue(String(v))}"`).join(',');
    family.samples.push(`${name}${rendered === '' ? '' : `{${rendered}}`} ${formatValue(value)}`);
  }

  text(): string {
    const lines: string[] = [];
    for (const [name, family] of this.families) lines.push(`# HELP ${name} ${family.help}`, `# TYPE ${name} gauge`, ...family.samples);
    lines.push('# EOF');
    return `${lines.join('\n')}\n`;
  }
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}


/**
 * Holders by class, then by unit. Every class has the series of holders without a known unit
 * (`""`, 0 when there are none), so an alert rule always finds one; units follow by name.
 */
function holderCounts(holders: readonly Holder[]): Map<string, Map<string, number>> {
  // Every class is exported (as 0 when absent), so alert rules see a series.
  const counts = new Map<string, Map<string, number>>(HOLDER_CLASSES.map((name) => [name, new Map([['', 0]])]));
  for (const holder of holders) {
    const byUnit = counts.get(holder.class) ?? new Map([['', 0]]);
    byUnit.set(unitOf(holder), (byUnit.get(unitOf(holder)) ?? 0) + 1);
    counts.set(holder.class, byUnit);
  }
  // '' sorts first.
  return new Map([...counts].map(([name, byUnit]) => [name, new Map([...byUnit].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))]));
}

function unitOf(holder: Holder): string {
  return holder.owner?.location.unit ?? holder.unit ?? '';
}

const UP_HELP = 'Whether gpugate could read NVML (0: the error and message labels say why; no GPU figures follow).';
const TIMESTAMP_HELP = 'When this sample was taken.';
/** The help of gpugate_gpu_holders; the stale classes come from the catalogue. */
const HOLDERS_HELP = `Processes holding the GPU, by class (${[...STALE_HOLDER_CLASSES].join('/')} are stale) and systemd unit (unit="": none known).`;

const HOLDERS_KNOWN_HELP =
  'Whether NVML listed the processes on the GPU (0: holders unknown, the error label says why; no gpugate_gpu_holders series then, since "none" would be a guess).';

/** The exposition when NVML could not be read at all. */
export function prometheusFailureText(failure: PrometheusFailure): string {
  const out = new Exposition();
  out.gauge('gpugate_up', UP_HELP, { error: failure.code ?? 'error', message: failure.message.split('\n')[0] ?? '' }, 0);
  out.gauge('gpugate_sample_timestamp_seconds', TIMESTAMP_HELP, {}, failure.timestampSeconds);
  return out.text();
}

/** The labels that identify a GPU: its index and its UUID (the last known one when NVML lost it). */
function gpuLabels(device: GpuDevice, lastKnown: ReadonlyMap<number, string> | undefined): Labels {
  const uuid = device.uuid ?? lastKnown?.get(device.index);
  return uuid === undefined || uuid === '' ? { gpu: device.index } : { gpu: device.index, uuid };
}

/** Render the exposition text. */
export function prometheusText(input: PrometheusInput): string {
  const out = new Exposition();
  const library = input.library;
  out.gauge('gpugate_up', UP_HELP, {}, 1);
  out.gauge('gpugate_nvml_info', 'NVML library and driver in use (value is always 1).', {
    driver_version: library?.driverVersion ?? '',
    nvml_version: library?.nvmlVersion ?? '',
    cuda_driver_version: library?.cudaDriverVersion ?? '',
  }, 1);
  out.gauge('gpugate_sample_timestamp_seconds', TIMESTAMP_HELP, {}, input.timestampSeconds);
  const idOf = new Map(input.devices.map((device) => [device.index, gpuLabels(device, input.lastKnownUuids)]));
  const id = (device: GpuDevice): Labels => idOf.get(device.index) ?? { gpu: device.index };
  for (const device of input.devices) {
    const labels: Labels = { ...id(device) };
    if (device.pciBusId !== null) labels['pci_bus_id'] = device.pciBusId;
    if (device.name !== null) labels['name'] = device.name;
    out.gauge('gpugate_gpu_info', 'GPU identity (value is always 1; a lost GPU keeps its last known uuid).', labels, 1);
  }
  for (const device of input.devices) {
    const labels = device.error === null ? id(device) : { ...id(device), error: device.error.code };
    out.gauge('gpugate_gpu_up', 'Whether NVML could read the GPU (0 when lost or failing: the error label says why).', labels, device.error === null ? 1 : 0);
  }
  const perDevice = (name: string, help: string, value: (device: GpuDevice) => number | null | undefined): void => {
    for (const device of input.devices) {
      const v = value(device);
      if (v !== null && v !== undefined) out.gauge(name, help, id(device), v);
    }
  };
  perDevice('gpugate_gpu_memory_total_bytes', 'Total GPU memory.', (d) => d.memory?.totalBytes);
  perDevice('gpugate_gpu_memory_used_bytes', 'GPU memory in use (v2: excluding driver-reserved memory).', (d) => d.memory?.usedBytes);
  perDevice('gpugate_gpu_memory_free_bytes', 'GPU memory free.', (d) => d.memory?.freeBytes);
  perDevice('gpugate_gpu_memory_reserved_bytes', 'GPU memory reserved by the driver.', (d) => d.memory?.reservedBytes);
  perDevice('gpugate_gpu_utilization_ratio', 'Share of the last sample period in which a kernel ran on the GPU (0-1).',
    (d) => (d.utilization === null ? null : d.utilization.gpuPercent / 100));
  perDevice('gpugate_gpu_memory_utilization_ratio', 'Share of the last sample period in which device memory was read or written (0-1).',
    (d) => (d.utilization === null ? null : d.utilization.memoryPercent / 100));
  perDevice('gpugate_gpu_temperature_celsius', 'GPU core temperature.', (d) => d.temperatureC);
  perDevice('gpugate_gpu_power_watts', 'GPU power draw.', (d) => d.powerWatts);
  perDevice('gpugate_gpu_processes', 'Processes NVML lists on the GPU.', (d) => (Array.isArray(d.processes) ? d.processes.length : null));
  for (const device of input.devices) {
    if (device.processes === undefined) continue;
    const failure = device.fieldErrors['processes'];
    const labels = device.processes === null ? { ...id(device), error: failure?.code ?? 'unreadable' } : id(device);
    out.gauge('gpugate_gpu_holders_known', HOLDERS_KNOWN_HELP, labels, device.processes === null ? 0 : 1);
  }
  if (input.holders !== undefined) {
    for (const device of input.devices) {
      // Unknown holders are not "0 holders": their series are left out (gpugate_gpu_holders_known is 0).
      if (device.processes === null) continue;
      const onDevice = input.holders.filter((holder) => holder.gpus === undefined || holder.gpus.includes(device.index));
      for (const [name, byUnit] of holderCounts(onDevice)) {
        for (const [unit, count] of byUnit) {
          out.gauge('gpugate_gpu_holders', HOLDERS_HELP,
            { ...id(device), class: name, unit }, count);
        }
      }
    }
  }
  if (input.unattributedBytes !== undefined) {
    const unattributed = input.unattributedBytes;
    perDevice('gpugate_gpu_unattributed_bytes', 'Used memory that no listed process accounts for (teardown or hidden holders).',
      (d) => unattributed.get(d.index));
  }
  const shm = input.shm;
  if (shm !== undefined && shm !== null) {
    out.gauge('gpugate_shm_leaked_files', 'Engine /dev/shm files that no live process references.', {}, shm.leaked.length);
    const leakedBytes = shm.leaked.reduce((sum, entry) => sum + (entry.allocatedBytes ?? entry.sizeBytes ?? 0), 0);
    out.gauge('gpugate_shm_leaked_bytes', 'Memory those files take on tmpfs.', {}, leakedBytes);
    if (shm.tmpfsFreeBytes !== null) out.gauge('gpugate_shm_free_bytes', 'Free space on /dev/shm.', {}, shm.tmpfsFreeBytes);
    if (shm.tmpfsTotalBytes !== null) out.gauge('gpugate_shm_size_bytes', 'Size of /dev/shm.', {}, shm.tmpfsTotalBytes);
  }
  return out.text();
}

/** The UUID each GPU index had in an earlier exposition (its gpugate_gpu_info lines). */
export function uuidsFromExposition(text: string): Map<number, string> {
  const uuids = new Map<number, string>();
  for (const match of text.matchAll(/^gpugate_gpu_info\{gpu="(\d+)",uuid="((?:[^"\\]|\\.)*)"/gm)) {
    uuids.set(Number(match[1]), (match[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c)));
  }
  return uuids;
}
