/**
 * Device selection: turns selectors (NVML indices, GPU-/MIG- UUIDs or unique prefixes, PCI bus
 * ids) or, when none are given, the environment (NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES,
 * SLURM_JOB_GPUS) into the NVML indices to watch. A selector that matches nothing, or a prefix
 * that matches several devices, is a DeviceSelectionError naming what exists.
 */
import type { GpuDevice } from '../types';
import { DeviceSelectionError } from './device-selection-error';
import { gpuIdentity } from './gpu-label';
import { NvmlError, nvmlErrorName } from '../nvml/nvml-error';

/** What selecting needs of a device: its identity, a device-level error, and its MIG instances when listed. */
export type SelectableDevice = Pick<GpuDevice, 'index' | 'uuid' | 'pciBusId' | 'error'> & { migDevices?: GpuDevice['migDevices'] };

/** Where a selection came from. */
export type DeviceSelectionSource = 'option' | 'NVIDIA_VISIBLE_DEVICES' | 'CUDA_VISIBLE_DEVICES' | 'SLURM_JOB_GPUS' | 'all';

/** The outcome of selectDevices. */
export interface DeviceSelection {
  /** NVML indices of the selected GPUs (the parent GPU for a MIG selector), in selection order, no duplicates. */
  indices: number[];
  /** UUIDs of selected MIG instances (their parents are in `indices`). */
  migUuids: string[];
  /** Where the selection came from. */
  source: DeviceSelectionSource;
  /** Things the operator should know, e.g. that CUDA ordinals were taken as NVML indices. */
  warnings: string[];
}

const PCI_RE = /^(?:([0-9a-f]{4}|[0-9a-f]{8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$/i;
const SELECTOR_EXPECTED = 'an NVML index, a GPU-/MIG- UUID (or a unique prefix of one) or a PCI bus id like 0000:1b:00.0';

/** Splits a comma-separated selector list (`0,2`, `GPU-3f1a,GPU-77`), trimming blanks and dropping empty entries. */
export function parseSelectorList(text: string): string[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

/** Canonical form of a PCI bus id (8-digit domain, upper case), or null when the text is not one. */
export function normalizePciBusId(text: string): string | null {
  const match = PCI_RE.exec(text.trim());
  if (!match) return null;
  const domain = (match[1] ?? '0').padStart(8, '0');
  return `${domain}:${match[2]}:${match[3]}.${match[4]}`.toUpperCase();
}

function describe(device: SelectableDevice): string {
  return `${device.index} (${gpuIdentity(device)})`;
}

function everything(devices: readonly SelectableDevice[]): string[] {
  const list: string[] = [];
  for (const device of devices) {
    list.push(describe(device));
    for (const mig of device.migDevices ?? []) list.push(`${mig.uuid} (MIG on GPU ${device.index})`);
  }
  return list;
}

/**
 * A UUID or bus-id selector that matches no readable GPU while some GPU's identity could not be
 * read (a lost GPU answers nothing, its UUID included): the selector may well name that GPU, so
 * this is the GPU's failure (exit 69), not a configuration error.
 */
function unidentifiedDeviceError(devices: readonly SelectableDevice[], what: string): NvmlError | null {
  const unknown = devices.filter((d) => d.error !== null && (d.uuid === null || d.pciBusId === null));
  const first = unknown[0];
  if (first === undefined || first.error === null) return null;
  const list = unknown.map((d) => `GPU ${d.index} (${d.error?.code ?? 'unreadable'}: ${d.error?.message ?? ''})`).join(', ');
  return new NvmlError({
    code: nvmlErrorName(first.error.nvmlReturn),
    nvmlReturn: first.error.nvmlReturn,
    fn: first.error.fn,
    device: first.index,
    message: `${what} matches no readable GPU, and ${list} cannot be identified: it may be the selected one; waiting cannot help`,
  });
}

interface Match {
  index: number;
  migUuid: string | null;
}

function matchOne(devices: readonly SelectableDevice[], selector: string, origin: string): Match {
  const text = selector.trim();
  const what = origin === 'option' ? `GPU selector ${JSON.stringify(selector)}` : `GPU selector ${JSON.stringify(selector)} (from ${origin})`;
  const existing = devices.length === 0 ? 'no GPUs are visible' : `these exist: ${everything(devices).join(', ')}`;
  if (/^\d+$/.test(text)) {
    const index = Number(text);
    const device = devices.find((d) => d.index === index);
    if (!device) throw new DeviceSelectionError(selector, everything(devices), `${what} matches no GPU index; ${existing}`);
    return { index, migUuid: null };
  }
  if (/^(gpu|mig)-/i.test(text)) {
    const wanted = text.toLowerCase();
    const candidates: Array<Match & { uuid: string }> = [];
    for (const device of devices) {
      if (device.uuid !== null) candidates.push({ index: device.index, migUuid: null, uuid: device.uuid });
      for (const mig of device.migDevices ?? []) candidates.push({ index: device.index, migUuid: mig.uuid, uuid: mig.uuid });
    }
    const exact = candidates.find((c) => c.uuid.toLowerCase() === wanted);
    if (exact) return { index: exact.index, migUuid: exact.migUuid };
    const prefixed = candidates.filter((c) => c.uuid.toLowerCase().startsWith(wanted));
    if (prefixed.length === 1) {
      const only = prefixed[0]!;
      return { index: only.index, migUuid: only.migUuid };
    }
    if (prefixed.length > 1) {
      const names = prefixed.map((c) => c.uuid);
      throw new DeviceSelectionError(selector, names, `${what} is ambiguous: it is a prefix of ${names.join(', ')}; give more characters`);
    }
    throw unidentifiedDeviceError(devices, what) ?? new DeviceSelectionError(selector, everything(devices), `${what} matches no GPU or MIG UUID; ${existing}`);
  }
  const pci = normalizePciBusId(text);
  if (pci !== null) {
    const device = devices.find((d) => d.pciBusId !== null && normalizePciBusId(d.pciBusId) === pci);
    if (!device) throw unidentifiedDeviceError(devices, what) ?? new DeviceSelectionError(selector, everything(devices), `${what} matches no PCI bus id; ${existing}`);
    return { index: device.index, migUuid: null };
  }
  throw new DeviceSelectionError(selector, everything(devices), `${what} is not understood: expected ${SELECTOR_EXPECTED}`);
}

function build(devices: readonly SelectableDevice[], selectors: ReadonlyArray<string | number>, source: DeviceSelectionSource, warnings: string[]): DeviceSelection {
  const indices: number[] = [];
  const migUuids: string[] = [];
  for (const selector of selectors) {
    // A number is an NVML index, as NVML's own API takes it.
    const match = matchOne(devices, typeof selector === 'number' ? String(selector) : selector, source);
    if (!indices.includes(match.index)) indices.push(match.index);
    if (match.migUuid !== null && !migUuids.includes(match.migUuid)) migUuids.push(match.migUuid);
  }
  if (indices.length === 0) warnings.push(`no GPUs selected (${source === 'option' ? 'empty selector list' : `from ${source}`})`);
  return { indices, migUuids, source, warnings };
}

function all(devices: readonly SelectableDevice[], source: DeviceSelectionSource, warnings: string[]): DeviceSelection {
  return { indices: devices.map((d) => d.index), migUuids: [], source, warnings };
}

function fromCudaVisibleDevices(devices: readonly SelectableDevice[], value: string, env: NodeJS.ProcessEnv, warnings: string[]): DeviceSelection {
  const entries = value.split(',').map((entry) => entry.trim());
  const accepted: string[] = [];
  for (const entry of entries) {
    // CUDA stops at the first invalid entry (-1 is the usual way to hide every device).
    if (entry === '' || entry.startsWith('-')) {
      if (accepted.length > 0 || entries.length > 1) {
        warnings.push(`CUDA_VISIBLE_DEVICES=${value}: CUDA ignores every entry from ${JSON.stringify(entry)} on`);
      }
      break;
    }
    accepted.push(entry);
  }
  if (accepted.some((entry) => /^\d+$/.test(entry)) && env.CUDA_DEVICE_ORDER !== 'PCI_BUS_ID') {
    warnings.push(
      `CUDA_VISIBLE_DEVICES=${value} uses ordinals in CUDA order (fastest first), which equals NVML order only with CUDA_DEVICE_ORDER=PCI_BUS_ID; taking them as NVML indices`,
    );
  }
  return build(devices, accepted, 'CUDA_VISIBLE_DEVICES', warnings);
}

/**
 * Chooses the GPUs to watch. With `selectors` (even an empty list), exactly those (a number is an
 * NVML index); otherwise from
 * `env` (default process.env): NVIDIA_VISIBLE_DEVICES (`all`, `none`, `void`, a list), then
 * CUDA_VISIBLE_DEVICES (ordinals, UUIDs, MIG UUIDs; `-1` or empty = none), then SLURM_JOB_GPUS,
 * else every device. NVIDIA_VISIBLE_DEVICES=all defers to CUDA_VISIBLE_DEVICES when that is set.
 * Throws DeviceSelectionError when a selector matches nothing or is ambiguous.
 */
export function selectDevices(devices: readonly SelectableDevice[], selectors?: ReadonlyArray<string | number>, env: NodeJS.ProcessEnv = process.env): DeviceSelection {
  const warnings: string[] = [];
  if (selectors !== undefined) return build(devices, selectors, 'option', warnings);

  const nvidia = env.NVIDIA_VISIBLE_DEVICES?.trim();
  const cuda = env.CUDA_VISIBLE_DEVICES;
  if (nvidia !== undefined && nvidia !== '') {
    const lower = nvidia.toLowerCase();
    if (lower === 'none' || lower === 'void') {
      warnings.push(`NVIDIA_VISIBLE_DEVICES=${nvidia}: no GPUs are assigned`);
      return { indices: [], migUuids: [], source: 'NVIDIA_VISIBLE_DEVICES', warnings };
    }
    if (lower !== 'all') {
      const list = parseSelectorList(nvidia);
      const ordinals = list.every((entry) => /^\d+$/.test(entry));
      const missing = list.filter((entry) => !devices.some((d) => String(d.index) === entry));
      if (ordinals && missing.length > 0 && list.length === devices.length) {
        // Inside a container the runtime renumbers the injected GPUs from 0.
        warnings.push(
          `NVIDIA_VISIBLE_DEVICES=${nvidia} names host indices; NVML here sees exactly ${devices.length} GPU(s), as inside a container: selecting all of them`,
        );
        return all(devices, 'NVIDIA_VISIBLE_DEVICES', warnings);
      }
      return build(devices, list, 'NVIDIA_VISIBLE_DEVICES', warnings);
    }
    if (cuda === undefined) return all(devices, 'NVIDIA_VISIBLE_DEVICES', warnings);
  }
  if (cuda !== undefined) return fromCudaVisibleDevices(devices, cuda, env, warnings);
  const slurm = env.SLURM_JOB_GPUS?.trim();
  if (slurm !== undefined && slurm !== '') return build(devices, parseSelectorList(slurm), 'SLURM_JOB_GPUS', warnings);
  return all(devices, 'all', warnings);
}

/**
 * The error for a gate that selected no GPU: "nothing to check" must never read as "free". Names
 * what emptied the selection (the variable and its value, the option, or a host without GPUs)
 * and how to accept it deliberately.
 */
export function emptySelectionError(selection: DeviceSelection, selectors: ReadonlyArray<string | number> | undefined, env: NodeJS.ProcessEnv = process.env): DeviceSelectionError {
  let what: string;
  let selector: string;
  if (selection.source === 'option') {
    selector = (selectors ?? []).join(',');
    what = `the GPU selector list ${JSON.stringify(selector)} selects no GPU`;
  } else if (selection.source === 'all') {
    selector = '';
    what = 'NVML reports no GPU on this host';
  } else {
    selector = `${selection.source}=${env[selection.source] ?? ''}`;
    what = `${selection.source}=${JSON.stringify(env[selection.source] ?? '')} selects no GPU`;
  }
  return new DeviceSelectionError(
    selector,
    [],
    `${what}: there is nothing to check, and that is not "free"; select GPUs (the gpus option), fix the variable, or accept an empty selection explicitly (allowEmptySelection: true)`,
    { emptySelection: true },
  );
}
