/** gpugate: the public API. */
export * from './types';
export * from './usage-error';
export * from './config-error';
export * from './units';
export * from './device-selection-error';
export * from './devices';
export * from './criteria';
export * from './wait-timeout-error';
export * from './wait';
export * from './stale';
export * from './shm';
export * from './reap';
export { openNvml, DEFAULT_CALL_TIMEOUT_MS, MAX_PENDING_CALLS } from './session';
export {
  NvmlError,
  isFatalNvmlError,
  nvmlCodeName,
  GPUGATE_LIBRARY_NOT_FOUND,
  GPUGATE_TIMEOUT,
  GPUGATE_SESSION_CLOSED,
  GPUGATE_QUEUE_FULL,
  GPUGATE_NATIVE_FAILURE,
} from './errors';
export type { NvmlErrorOptions } from './errors';
export { sdNotify } from './notify';
export { IMPLAUSIBLE_PROCESS_LIST } from './snapshot-decode';
export * from './native-load-error';
export * from './sim-library';
export * from './sim-host';
export { runBench } from './bench';
export type { BenchOptions, BenchResult, BenchMeasure, LatencyStats, NvidiaSmiMeasure } from './bench';
