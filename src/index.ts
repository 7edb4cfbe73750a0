/** gpugate: the public API. */
export * from './types';
export * from './gpugate-error';
export { isGpugateError, type AnyGpugateError } from './error-union';
export * from './usage-error';
export * from './config-error';
export * from './units';
export * from './gate/device-selection-error';
export * from './gate/devices';
export * from './gate/criteria';
export { ENGINE_NAMES, engineView, engineViewText, cudaTotalBytes, type EngineMinFree, type EngineName, type EngineView } from './gate/engine-view';
export { CUDA_CONTEXT_SIZES, DEFAULT_CUDA_CONTEXT_BYTES, cudaContextBytes, type CudaContextSize } from './gate/cuda-context-sizes';
export * from './gate/wait-timeout-error';
export { waitForGpusFree, checkGpusOnce, GpuWaitAbortError } from './gate/wait';
export type { WaitOptions, GpuFailureReason, GpuEvaluation, Evaluation, WaitResult } from './gate/wait';
export { gate } from './gate/gate';
export type { GateOptions, GateEvent, StalePolicy } from './gate/gate';
export type { GateOutcome, GateResult, GateStale, GateActions } from './gate/gate-outcome';
export { gateDefaults, DEFAULT_INTERVAL_MS, DEFAULT_STABLE_MS, DEFAULT_TIMEOUT_MS, DEFAULT_KILL_GRACE_MS } from './gate/gate-defaults';
export { describeGpuFailure, describeFailures, holderName, holderLabel } from './gate/failure-text';
export { STALE_HOLDER_CLASSES, isStaleHolder } from './gate/stale-holders';
export { HOLDER_CATALOGUE, RELEASING_HOLDER_CLASSES, LIVE_HOLDER_CLASSES, type HolderClassRecord } from './gate/holder-classes';
export * from './gate/stale';
export * from './gate/select';
export * from './gate/placement';
export { LeaseDirectory, GpuLeaseError, leaseFileName, LEASE_DIR_ENV, DEFAULT_LEASE_DIR, DEFAULT_LEASE_LOCK_TIMEOUT_MS } from './host/gpu-lease';
export type { LeaseRecord, LeaseRelease, LeaseState, LeaseStatus, LeaseTerms, OwnLease } from './host/gpu-lease';
export type { NewLease } from './host/lease-record';
export { UnsafePathError, FileSystemError } from './host/safe-file';
export { readPciPlacement, sysfsPciAddress, SYSFS_ROOT_ENV, DEFAULT_SYSFS_ROOT } from './host/pci-topology';
export type { PciPlacement } from './host/pci-topology';
export * from './host/shm';
export * from './host/process-owner';
export * from './host/cgroup-location';
export * from './gate/reap';
export { openNvml, MAX_PENDING_CALLS } from './nvml/session';
export { DEFAULT_CALL_TIMEOUT_MS } from './nvml/call-timeout';
export {
  NvmlError,
  isFatalNvmlError,
  nvmlCodeName,
  GPUGATE_LIBRARY_NOT_FOUND,
  GPUGATE_TIMEOUT,
  GPUGATE_SESSION_CLOSED,
  GPUGATE_QUEUE_FULL,
  GPUGATE_NATIVE_FAILURE,
} from './nvml/nvml-error';
export type { NvmlErrorOptions, NvmlErrorCode, NvmlErrorName } from './nvml/nvml-error';
export { sdNotify } from './host/notify';
export { IMPLAUSIBLE_PROCESS_LIST } from './nvml/snapshot-decode';
export * from './nvml/native-load-error';
export * from './simulator/sim-library';
export * from './simulator/sim-host';
export { runBench } from './bench/run-bench';
export type { BenchOptions, BenchResult, BenchMeasure, LatencyStats, NvidiaSmiMeasure } from './bench/run-bench';
export { runDoctor } from './doctor/doctor';
export type { DoctorOptions, DoctorReport } from './doctor/doctor';
export type { DoctorCheck, DoctorStatus } from './doctor/doctor-check';
export { worstStatus } from './doctor/doctor-check';
export { XID_TABLE, explainXid, parseXidLines } from './doctor/xid-table';
export type { XidEvent, XidExplanation } from './doctor/xid-table';
