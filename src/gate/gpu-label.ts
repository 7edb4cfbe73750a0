/**
 * How a message names a GPU: its NVML index with the UUID and PCI bus id it reported. A GPU that
 * could not be identified (lost before the session opened) has neither, and says so rather than
 * printing empty fields.
 */

/** The identity fields a label uses; null when NVML could not report them. */
export interface LabelledGpu {
  index: number;
  uuid: string | null;
  pciBusId: string | null;
}

/** `GPU 5 (GPU-…, 00000000:AB:00.0)`, or `GPU 5 (identity unknown)`. */
export function gpuLabel(gpu: LabelledGpu): string {
  return `GPU ${gpu.index} (${gpuIdentity(gpu)})`;
}

/** `GPU-…, 00000000:AB:00.0`, the one that is known, or `identity unknown`. */
export function gpuIdentity(gpu: Omit<LabelledGpu, 'index'>): string {
  const known = [gpu.uuid, gpu.pciBusId].filter((field): field is string => field !== null && field !== '');
  return known.length === 0 ? 'identity unknown' : known.join(', ');
}
