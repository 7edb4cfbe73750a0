/**
 * gpugate: the public API, exactly the names README.md's "The API" section lists. Every name here
 * is a semver promise; everything else in the package is internal and may change in any release.
 * test/pack/package-exports.test.ts keeps this list, README's and the shipped declarations' JSDoc in step.
 */

// Reading NVML.
export { openNvml, MAX_PENDING_CALLS } from './nvml/session';
export type {
  NvmlSession, NvmlMemoryReader, OpenNvmlOptions, Snapshot, SnapshotOptions, LibraryInfo, GpuDevice, GpuMemory, GpuProcess,
  GpuHealth, MigDevice, ProcessKind, RecoveryAction,
} from './types';

// Gating: what `gpugate wait` / `check` / `select` do.
export { gate } from './gate/gate';
export type { GateOptions, GateEvent, StalePolicy } from './gate/gate';
export type { GateOutcome, GateResult, GateStale, GateActions } from './gate/gate-outcome';
export { gateDefaults } from './gate/gate-defaults';
export { waitForGpusFree, checkGpusOnce } from './gate/wait';
export type { WaitOptions, WaitResult, Evaluation, GpuEvaluation, GpuFailureReason } from './gate/wait';
export type { MinFree } from './gate/criteria';
export type { EngineMinFree, EngineName } from './gate/engine-view';
export { selectGpus } from './gate/select';
export type { SelectOptions, SelectResult, SelectedGpu, SelectCandidate, SelectExclusion } from './gate/select';
export type { LeaseRelease, OwnLease } from './host/gpu-lease';

// Who holds the GPUs.
export { inspectHolders } from './gate/stale';
export type { InspectOptions, HolderReport, Holder, HolderClass } from './gate/stale';
export { HOLDER_CATALOGUE } from './gate/holder-classes';
export type { HolderClassRecord } from './gate/holder-classes';

// Health checks and the poll benchmark.
export { runDoctor } from './doctor/doctor';
export type { DoctorOptions, DoctorReport } from './doctor/doctor';
export type { DoctorCheck, DoctorStatus } from './doctor/doctor-check';
export { runBench } from './bench/run-bench';
export type { BenchOptions, BenchResult } from './bench/run-bench';

// The simulator.
export { findSimLibrary, findSimLibraryFor, simProfileForScenario, simDriverProfiles } from './simulator/sim-library';
export type { FindSimLibraryOptions, SimDriverProfile } from './simulator/sim-library';
export { SimulatedHost } from './simulator/sim-host';
export type { SimulatedHostOptions } from './simulator/sim-host';

// The sizes and durations the command line accepts.
export { parseSize, parseDuration } from './units';
export type { SizeOrFraction } from './units';

// Errors: every one is a GpugateError with a stable code.
export { GpugateError, ErrorCode } from './gpugate-error';
export type { GpugateErrorCode } from './gpugate-error';
export { isGpugateError } from './error-union';
export type { AnyGpugateError } from './error-union';
export type { NvmlErrorCode, NvmlErrorName } from './nvml/nvml-error';
export { NvmlError } from './nvml/nvml-error';
export { GpuWaitTimeoutError } from './gate/wait-timeout-error';
export { GpuWaitAbortError } from './gate/wait';
export { UsageError } from './usage-error';
export { ConfigError } from './config-error';
export { DeviceSelectionError } from './gate/device-selection-error';
export { NativeLoadError } from './nvml/native-load-error';
export { SimLibraryNotFoundError } from './simulator/sim-library';
export { GpuLeaseError } from './host/gpu-lease';
export { UnsafePathError, FileSystemError } from './host/safe-file';
