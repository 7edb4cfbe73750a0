/**
 * A free-memory criterion in an inference engine's own terms. vLLM (>= 0.10) starts by creating
 * its CUDA context, then reads free and total memory from CUDA (torch.cuda.mem_get_info) and
 * fails when free < ceil(total × --gpu-memory-utilization). CUDA's total is NVML's total minus
 * the driver's reserved memory, and CUDA's free is NVML's free minus the context just created,
 * so a plain fraction of NVML's total is off both ways: stricter at 0.9, too early at 0.5.
 */
import { ConfigError } from '../config-error';
import { cudaContextBytes } from './cuda-context-sizes';

/** The engines whose start check gpugate can compute. */
export const ENGINE_NAMES = ['vllm'] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

/** How each engine names itself in output. */
const ENGINE_LABELS: Readonly<Record<EngineName, string>> = { vllm: 'vLLM' };

/** `minFree` as an engine checks it: vLLM's --gpu-memory-utilization, and optionally the measured CUDA context size. */
export interface EngineMinFree {
  engine: EngineName;
  /** vLLM's --gpu-memory-utilization: above 0 and below 1 (at 1 the context alone leaves too little). */
  utilization: number;
  /** The CUDA context's cost in bytes; default: per GPU model (src/gate/cuda-context-sizes.ts). */
  contextBytes?: number;
}

/** What the engine would see at its start on one GPU, and its verdict (margin not included). */
export interface EngineView {
  engine: EngineName;
  utilization: number;
  /** The CUDA context the estimate takes off NVML's free memory. */
  contextBytes: number;
  /** NVML's free minus the context (never below 0). */
  cudaFreeBytes: number;
  /** NVML's total minus reserved (NVML's total where the driver reports no reserved figure). */
  cudaTotalBytes: number;
  /** ceil(cudaTotal × utilization): what the engine asks for. */
  requestedBytes: number;
  /** Whether the engine's own check would pass: cudaFree >= requested. */
  ok: boolean;
}

/** True when `value` is an engine criterion rather than a size or fraction. */
export function isEngineMinFree(value: object): value is EngineMinFree {
  return 'engine' in value;
}

/** Rejects an engine criterion that names no known engine or cannot be met, naming the value. */
export function checkEngineMinFree(value: EngineMinFree): void {
  if (!(ENGINE_NAMES as readonly string[]).includes(value.engine)) {
    throw new ConfigError('minFree', `minFree engine ${JSON.stringify(value.engine)} is not known: expected ${ENGINE_NAMES.join(', ')}`);
  }
  const u = value.utilization;
  if (typeof u !== 'number' || !Number.isFinite(u) || u <= 0 || u >= 1) {
    throw new ConfigError('minFree', `minFree utilization ${String(u)} is out of range: expected above 0 and below 1 (vLLM's --gpu-memory-utilization; at 1 its own CUDA context leaves too little)`);
  }
  if (value.contextBytes !== undefined && (!Number.isSafeInteger(value.contextBytes) || value.contextBytes < 0)) {
    throw new ConfigError('minFree', `minFree contextBytes ${String(value.contextBytes)} is not a byte count (a whole number >= 0)`);
  }
}

/**
 * CUDA's total for a GPU as NVML reports it: total minus reserved. Where the driver reports no
 * reserved figure (the v1 query), NVML's total: the engine then asks for up to utilization ×
 * reserved more, so the gate can only pass later than the engine would, never earlier.
 */
export function cudaTotalBytes(totalBytes: number, reservedBytes: number | null): number {
  return totalBytes - (reservedBytes ?? 0);
}

/** The context size `criterion` assumes on a GPU named `name`. */
export function contextBytesFor(criterion: EngineMinFree, name: string | null): number {
  return criterion.contextBytes ?? cudaContextBytes(name).bytes;
}

/** The reading's parts the engine's check depends on. */
export interface EngineReading {
  /** NVML's device name; null when the GPU could not report it. */
  name: string | null;
  totalBytes: number;
  reservedBytes: number | null;
}

/**
 * NVML free memory a GPU needs for the engine to start, plus the margin: ceil(cudaTotal ×
 * utilization) + context + margin (the engine's inequality, moved to NVML's free).
 */
export function engineNeededFreeBytes(criterion: EngineMinFree, marginBytes: number, gpu: EngineReading): number {
  return Math.ceil(cudaTotalBytes(gpu.totalBytes, gpu.reservedBytes) * criterion.utilization) + contextBytesFor(criterion, gpu.name) + marginBytes;
}

/** What the engine would see on a GPU with `freeBytes` free, and whether its check passes. */
export function engineView(criterion: EngineMinFree, gpu: EngineReading & { freeBytes: number }): EngineView {
  const contextBytes = contextBytesFor(criterion, gpu.name);
  const total = cudaTotalBytes(gpu.totalBytes, gpu.reservedBytes);
  const cudaFreeBytes = Math.max(0, gpu.freeBytes - contextBytes);
  const requestedBytes = Math.ceil(total * criterion.utilization);
  return { engine: criterion.engine, utilization: criterion.utilization, contextBytes, cudaFreeBytes, cudaTotalBytes: total, requestedBytes, ok: cudaFreeBytes >= requestedBytes };
}

/** GiB with two decimals, as vLLM prints its figures. */
function gib(bytes: number): string {
  return (bytes / 1024 ** 3).toFixed(2);
}

/** e.g. "vLLM at 0.9 would see 3.27/94.97 GiB free and fail (it asks for 85.47 GiB)". */
export function engineViewText(view: EngineView): string {
  return `${ENGINE_LABELS[view.engine]} at ${view.utilization} would see ${gib(view.cudaFreeBytes)}/${gib(view.cudaTotalBytes)} GiB free and ${view.ok ? 'pass' : 'fail'} (it asks for ${gib(view.requestedBytes)} GiB)`;
}
