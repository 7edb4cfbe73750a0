/**
 * The readings on which waiting cannot help: a fatal NVML code, a recovery action the driver
 * names, memory that cannot be judged where gpugate runs, figures that do not add up. Each is an
 * NvmlError that ends a wait at once instead of polling until the timeout.
 */
import { gpuLabel } from './gpu-label';
import type { GpuDevice, GpuMemory, MigDevice } from '../types';
import { formatBytes } from '../units';
import { implausibleMemory, type Criteria } from './criteria';
import { GPUGATE_MEMORY_IMPLAUSIBLE, GPUGATE_MEMORY_UNJUDGEABLE, GPUGATE_RECOVERY_REQUIRED, NvmlError, isFatalNvmlError, nvmlErrorName } from '../nvml/nvml-error';
import { recoveryRemedy } from '../nvml/recovery-action';

function fatalFromDevice(device: GpuDevice): Error | null {
  // A fatal code on the memory read (the one field every criterion needs) ends the wait too.
  const error = device.error ?? device.fieldErrors['memory'] ?? null;
  if (!error || !isFatalNvmlError(error)) return null;
  return new NvmlError({
    code: error.code,
    nvmlReturn: error.nvmlReturn,
    fn: error.fn,
    device: device.index,
    message: `${gpuLabel(device)}: ${error.message}; waiting cannot help`,
  });
}

/**
 * A GPU whose driver names a recovery action (reset, reboot, drain: NVML's field 230, changed
 * with Xid 154) will not free up by waiting: end at once, naming the action and the operator's
 * step. An unreadable action (older drivers) gates nothing.
 */
function recoveryRequired(device: GpuDevice): Error | null {
  const action = device.recoveryAction;
  if (action === null || action === 'none') return null;
  return new NvmlError({
    code: GPUGATE_RECOVERY_REQUIRED,
    nvmlReturn: null,
    fn: 'nvmlDeviceGetFieldValues',
    device: device.index,
    message:
      `${gpuLabel(device)} needs recovery action ${action} (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; Xid 154): ` +
      `waiting cannot help; ${recoveryRemedy(action, device.index)}`,
  });
}

/**
 * Unified-memory GPUs (GH200, GB200, GB10, Jetson) can report no device memory figures at all
 * (both queries NOT_SUPPORTED, or a total of 0). A memory criterion can then never be met, so
 * say so at once instead of polling until the timeout.
 */
function unjudgeableMemory(device: GpuDevice, criteria: Criteria): Error | null {
  if (criteria.minFree === null && criteria.maxUsed === null) return null;
  const failure = device.fieldErrors['memory'];
  const notSupported = failure?.code === 'NVML_ERROR_NOT_SUPPORTED';
  if (!notSupported && !(device.memory !== null && device.memory.totalBytes === 0)) return null;
  const why = notSupported ? `${failure.fn} answers NOT_SUPPORTED` : 'its total memory is 0';
  return new NvmlError({
    code: nvmlErrorName(failure?.nvmlReturn ?? 3),
    nvmlReturn: failure?.nvmlReturn ?? 3,
    fn: failure?.fn ?? 'nvmlDeviceGetMemoryInfo_v2',
    device: device.index,
    message:
      `${gpuLabel(device)} reports no device memory figures (${why}), as unified-memory ` +
      'systems (GH200, GB200, GB10, Jetson) can: a free-memory criterion cannot be judged there and waiting cannot help; ' +
      'use --no-processes (noProcesses) instead',
  });
}

/**
 * A GPU whose memory cannot be read here for want of permission (inside a container, NVML answers
 * NO_PERMISSION for a MIG GPU's parent) can never be judged: say so at once, naming what would
 * help, instead of polling until the timeout. Only where a memory criterion applies.
 */
function memoryWithoutPermission(device: GpuDevice, criteria: Criteria): Error | null {
  if (criteria.minFree === null && criteria.maxUsed === null) return null;
  const failure = device.fieldErrors['memory'];
  if (failure?.code !== 'NVML_ERROR_NO_PERMISSION') return null;
  return new NvmlError({
    code: failure.code,
    nvmlReturn: failure.nvmlReturn,
    fn: failure.fn,
    device: device.index,
    message:
      `${gpuLabel(device)}: ${failure.fn} answers NO_PERMISSION, as a MIG GPU's parent does ` +
      'inside a container: its memory cannot be judged here and waiting cannot help; select the MIG instance ' +
      '(its MIG- UUID, as the container runtime sets CUDA_VISIBLE_DEVICES), or run gpugate as root on the host',
  });
}

/**
 * A MIG instance that reports the whole GPU's memory as its own (as NVML can inside a container)
 * says nothing about the slice: free memory of the whole GPU is not the slice's. Only where a
 * memory criterion applies, and only when the parent's total is known to compare with.
 */
function migReportsWholeGpu(device: GpuDevice, mig: MigDevice, criteria: Criteria): Error | null {
  if (criteria.minFree === null && criteria.maxUsed === null) return null;
  if (mig.memory === null || device.memory === null || mig.memory.totalBytes < device.memory.totalBytes) return null;
  const fn = mig.memory.source === 'v2' ? 'nvmlDeviceGetMemoryInfo_v2' : 'nvmlDeviceGetMemoryInfo';
  return new NvmlError({
    code: GPUGATE_MEMORY_UNJUDGEABLE,
    nvmlReturn: null,
    fn,
    device: device.index,
    message:
      `${gpuLabel({ index: device.index, uuid: mig.uuid, pciBusId: device.pciBusId })}: the MIG instance reports the whole GPU's memory as its own ` +
      `(total ${formatBytes(mig.memory.totalBytes)}, the GPU's ${formatBytes(device.memory.totalBytes)}): its own free memory cannot be judged here ` +
      'and waiting cannot help; run gpugate where NVML reports per-instance memory (on the host, as root)',
  });
}

/**
 * A memory reading whose numbers do not add up ends the wait at once: it comes from a wrongly
 * laid out struct or a faulty driver, and any verdict drawn from it could say "free" on a busy
 * GPU. Only where a memory criterion applies.
 */
export function implausibleMemoryError(device: GpuDevice, memory: GpuMemory | null, label: string, criteria: Criteria): Error | null {
  if (memory === null || (criteria.minFree === null && criteria.maxUsed === null)) return null;
  const why = implausibleMemory(memory);
  if (why === null) return null;
  const fn = memory.source === 'v2' ? 'nvmlDeviceGetMemoryInfo_v2' : 'nvmlDeviceGetMemoryInfo';
  return new NvmlError({
    code: GPUGATE_MEMORY_IMPLAUSIBLE,
    nvmlReturn: null,
    fn,
    device: device.index,
    message: `${label}${device.pciBusId === null ? '' : `, ${device.pciBusId}`}: ${fn} reported implausible memory figures (${why}); the GPU cannot be judged and is never reported free`,
  });
}

/** Why waiting on a whole GPU (not a MIG instance) cannot help, or null. */
export function hopelessDevice(device: GpuDevice, wholeGpu: boolean, criteria: Criteria): Error | null {
  return fatalFromDevice(device) ?? recoveryRequired(device) ?? (wholeGpu ? (unjudgeableMemory(device, criteria) ?? memoryWithoutPermission(device, criteria)) : null);
}

/** Why waiting on a MIG instance of `device` cannot help, or null. */
export function hopelessMigReading(device: GpuDevice, mig: MigDevice, criteria: Criteria): Error | null {
  return migReportsWholeGpu(device, mig, criteria);
}
