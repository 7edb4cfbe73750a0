/**
 * What makes `gpugate status` end with 69 although it printed every GPU: a selected GPU NVML has
 * lost (or that answers another code after which waiting cannot help), or one whose memory figures
 * do not add up. The gate answers 69 for the same readings (src/gate/wait.ts); status reports them
 * the same way, and prints them beside the figures so nobody reads an impossible number as real.
 */

import { implausibleMemory } from '../gate/criteria';
import { GPUGATE_MEMORY_IMPLAUSIBLE, isFatalNvmlError } from '../nvml/nvml-error';
import type { GpuDevice } from '../types';
import { gpuLabel } from '../gate/gpu-label';

/** One GPU that cannot be reported as a working GPU. */
export interface StatusProblem {
  index: number;
  /** NVML's code (NVML_ERROR_GPU_IS_LOST…) or GPUGATE_MEMORY_IMPLAUSIBLE. */
  code: string;
  message: string;
}

/** Why a device's memory figures cannot be believed (see implausibleMemory), or null. */
export function memoryImplausibleReason(device: GpuDevice): string | null {
  return device.memory === null ? null : implausibleMemory(device.memory);
}

/** The problems of the selected devices, in index order; empty when status may exit 0. */
export function statusProblems(devices: readonly GpuDevice[]): StatusProblem[] {
  const problems: StatusProblem[] = [];
  for (const device of devices) {
    const error = device.error ?? device.fieldErrors['memory'] ?? null;
    if (error !== null && isFatalNvmlError(error)) {
      problems.push({ index: device.index, code: error.code, message: `${gpuLabel(device)}: ${error.message}` });
      continue;
    }
    const why = memoryImplausibleReason(device);
    if (why !== null) {
      problems.push({
        index: device.index,
        code: GPUGATE_MEMORY_IMPLAUSIBLE,
        message: `${gpuLabel(device)}: implausible memory figures (${why}); a gate cannot judge this GPU`,
      });
    }
  }
  return problems;
}
