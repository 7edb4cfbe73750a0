/**
 * When NVML cannot tell who holds a GPU, every output says so instead of "no holders": why the
 * process list cannot be read here, and what would let gpugate read it. Inside containers, vGPU
 * guests and WSL the lists answer NOT_SUPPORTED or NO_PERMISSION (MIG parents in containers).
 */
import type { FieldError, GpuProcess } from '../types';

/** What each answer of an unreadable process list means, and what would make the holders visible. */
const UNREADABLE_LIST: Readonly<Record<string, string>> = {
  NVML_ERROR_NO_PERMISSION:
    'NVML refuses to list the processes to this caller (as for a MIG GPU inside a container); run gpugate as root on the host, in the host PID namespace, to see them',
  NVML_ERROR_NOT_SUPPORTED:
    'this driver does not list processes on this GPU (vGPU guests, WSL and some containers answer so); only gpugate on the host that owns the GPU can name them',
};

/**
 * Why the holders of a GPU cannot be named, or null when its process list was read. `processes`
 * is the list as the snapshot gave it (null: unreadable, undefined: not asked for, which is not
 * "unknown"); `failure` is the list's field error.
 */
export function holdersUnknownReason(processes: readonly GpuProcess[] | null | undefined, failure: FieldError | undefined): string | null {
  if (processes !== null) return null;
  if (failure === undefined) return "NVML's process list could not be read: holders unknown";
  const why = UNREADABLE_LIST[failure.code] ?? 'holders unknown';
  return `NVML's process list could not be read (${failure.code} from ${failure.fn}): ${why}`;
}

/** Why the listed holders' memory is unknown (NVML's "not available"), or null when every figure was read. */
export function holderMemoryUnknownReason(processes: readonly GpuProcess[] | null | undefined): string | null {
  if (!processes?.some((process) => process.usedBytes === null)) return null;
  return 'NVML reports no per-process memory here ("not available", as under WSL and for MIG instances without privileges): which holder uses how much is unknown';
}
