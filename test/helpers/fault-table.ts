/**
 * The fault-injection table: every NVML function gpugate calls (by the logical name the addon
 * reports in `session.library.variants`) × the return codes NVML can plausibly give, with the
 * outcome each combination must have, both in the library (which device / field gets the error
 * or the null) and for the `gpugate` command (the exit code of operations.md's contract).
 *
 * test/reliability/fault-matrix.test.ts generates its rows from this table: adding a function
 * here adds |FAULT_CODES| rows, and a contract test fails when the addon binds a function that
 * has no row here.
 */

/** The codes injected into every function (nvml-abi.md), plus one number NVML does not list. */
export const FAULT_CODES: readonly number[] = [
  1, // UNINITIALIZED
  2, // INVALID_ARGUMENT
  3, // NOT_SUPPORTED
  4, // NO_PERMISSION
  7, // INSUFFICIENT_SIZE
  9, // DRIVER_NOT_LOADED
  10, // TIMEOUT
  15, // GPU_IS_LOST
  16, // RESET_REQUIRED
  18, // LIB_RM_VERSION_MISMATCH
  25, // ARGUMENT_VERSION_MISMATCH
  28, // GPU_NOT_FOUND
  999, // UNKNOWN
  4242, // not an NVML code: must be kept as its number (NVML_ERROR_4242)
];

/** The stable name gpugate must give each injected code (NvmlError.code, FieldError.code). */
export const FAULT_CODE_NAMES: Readonly<Record<number, string>> = {
  1: 'NVML_ERROR_UNINITIALIZED',
  2: 'NVML_ERROR_INVALID_ARGUMENT',
  3: 'NVML_ERROR_NOT_SUPPORTED',
  4: 'NVML_ERROR_NO_PERMISSION',
  7: 'NVML_ERROR_INSUFFICIENT_SIZE',
  9: 'NVML_ERROR_DRIVER_NOT_LOADED',
  10: 'NVML_ERROR_TIMEOUT',
  15: 'NVML_ERROR_GPU_IS_LOST',
  16: 'NVML_ERROR_RESET_REQUIRED',
  18: 'NVML_ERROR_LIB_RM_VERSION_MISMATCH',
  25: 'NVML_ERROR_ARGUMENT_VERSION_MISMATCH',
  28: 'NVML_ERROR_GPU_NOT_FOUND',
  999: 'NVML_ERROR_UNKNOWN',
  4242: 'NVML_ERROR_4242',
};

/** Codes that mean the device itself is gone or unusable: the whole device gets the error. */
export const DEVICE_LEVEL_CODES: ReadonlySet<number> = new Set([15, 16, 28]);

/**
 * Codes after which waiting cannot help (operations.md: exit 69 "NVML missing or failing to
 * initialise, version mismatch, GPU lost"), when they hit something the decision needs.
 * NO_PERMISSION is not among them: a MIG parent's aggregate memory query needs privileges that
 * its instances do not, so it is reported on the field; a gate with a memory criterion on that GPU
 * then ends at once (69, with NVML's code), since waiting cannot grant the permission.
 */
export const FATAL_CODES: ReadonlySet<number> = new Set([1, 9, 15, 16, 18, 28]);

/** Codes with which a library refuses the v2 memory struct; gpugate then reads v1 memory. */
export const MEMORY_V2_REFUSED_CODES: ReadonlySet<number> = new Set([2, 3, 13, 25]);

/** NVML_ERROR_NOT_SUPPORTED: on the last memory query it means no memory figures exist at all. */
const NOT_SUPPORTED = 3;
/** NVML_ERROR_NO_PERMISSION: on the memory query the GPU cannot be judged where gpugate runs. */
const NO_PERMISSION = 4;

/** Where in gpugate a function is called, which decides what its failure must do. */
export type FaultStage =
  /** nvmlInit: openNvml rejects. */
  | 'init'
  /** nvmlDeviceGetCount: openNvml rejects. */
  | 'count'
  /** nvmlShutdown: its failure changes nothing visible; close() still resolves. */
  | 'shutdown'
  /** nvmlSystemGet*: the `library` field is null, everything else works. */
  | 'system'
  /** nvmlDeviceGetHandleByIndex: the device carries the error for the whole session. */
  | 'handle'
  /** name / UUID / PCI / minor / capability / recovery action, read once at open: that identity field errs. */
  | 'identity'
  /** nvmlDeviceGetMemoryInfo_v2: refused codes fall back to v1; others err on `memory`. */
  | 'memory'
  /** nvmlDeviceGetMemoryInfo (v1), reached after v2 was refused. */
  | 'memory-v1'
  /** A field of a full (not memoryOnly) snapshot: persistence, compute mode, MIG mode, … */
  | 'field'
  /** The compute process list: `processes` is null and errs. */
  | 'process-list'
  /** The graphics / MPS lists: their own field errs, the merged list still comes back. */
  | 'process-list-extra'
  /** nvmlDeviceGetMaxMigDeviceCount on a MIG-enabled GPU: `migDevices` errs. */
  | 'mig-count'
  /** nvmlDeviceGetMigDeviceHandleByIndex: `migDevices` errs (a lost parent: the device errs). */
  | 'mig-handle'
  /** GPU / compute instance id of a MIG device: that MIG device errs. */
  | 'mig-instance-id'
  /** A health query (session.health(), gpugate doctor): its field of session.health() errs; no snapshot and no `check` calls it. */
  | 'health'
  /** Not injectable through the simulator (returns a string, not an nvmlReturn_t). */
  | 'not-injectable';

/** One NVML function gpugate calls. */
export interface FaultRow {
  /** The logical name, as a key of `session.library.variants`. */
  logical: string;
  stage: FaultStage;
  /** The snapshot field (fieldErrors key) or `library` key that must carry the failure. */
  field?: string;
  /** For 'not-injectable': why. */
  why?: string;
}

/** Every function gpugate resolves from the NVML library (native/symbols.cc). */
export const FAULT_TABLE: readonly FaultRow[] = [
  { logical: 'init', stage: 'init' },
  { logical: 'shutdown', stage: 'shutdown' },
  { logical: 'errorString', stage: 'not-injectable', why: 'returns a string; the simulator cannot make it fail' },
  { logical: 'systemGetDriverVersion', stage: 'system', field: 'driverVersion' },
  { logical: 'systemGetNvmlVersion', stage: 'system', field: 'nvmlVersion' },
  { logical: 'systemGetCudaDriverVersion', stage: 'system', field: 'cudaDriverVersion' },
  { logical: 'deviceGetCount', stage: 'count' },
  { logical: 'deviceGetHandleByIndex', stage: 'handle' },
  { logical: 'deviceGetName', stage: 'identity', field: 'name' },
  { logical: 'deviceGetUUID', stage: 'identity', field: 'uuid' },
  { logical: 'deviceGetMinorNumber', stage: 'identity', field: 'minorNumber' },
  { logical: 'deviceGetPciInfo', stage: 'identity', field: 'pciBusId' },
  { logical: 'deviceGetCudaComputeCapability', stage: 'identity', field: 'computeCapability' },
  { logical: 'deviceGetFieldValues', stage: 'identity', field: 'recoveryAction' },
  { logical: 'deviceGetMemoryInfo', stage: 'memory', field: 'memory' },
  { logical: 'deviceGetMemoryInfoV1', stage: 'memory-v1', field: 'memory' },
  { logical: 'deviceGetComputeRunningProcesses', stage: 'process-list', field: 'processes' },
  { logical: 'deviceGetGraphicsRunningProcesses', stage: 'process-list-extra', field: 'processes.graphics' },
  { logical: 'deviceGetMPSComputeRunningProcesses', stage: 'process-list-extra', field: 'processes.mps' },
  { logical: 'deviceGetPersistenceMode', stage: 'field', field: 'persistenceMode' },
  { logical: 'deviceGetComputeMode', stage: 'field', field: 'computeMode' },
  { logical: 'deviceGetMigMode', stage: 'field', field: 'migMode' },
  { logical: 'deviceGetUtilizationRates', stage: 'field', field: 'utilization' },
  { logical: 'deviceGetTemperature', stage: 'field', field: 'temperatureC' },
  { logical: 'deviceGetPowerUsage', stage: 'field', field: 'powerWatts' },
  { logical: 'deviceGetMaxMigDeviceCount', stage: 'mig-count', field: 'migDevices' },
  { logical: 'deviceGetMigDeviceHandleByIndex', stage: 'mig-handle', field: 'migDevices' },
  { logical: 'deviceGetGpuInstanceId', stage: 'mig-instance-id', field: 'gpuInstanceId' },
  { logical: 'deviceGetComputeInstanceId', stage: 'mig-instance-id', field: 'computeInstanceId' },
  { logical: 'deviceGetRemappedRows', stage: 'health', field: 'remappedRows' },
  { logical: 'deviceGetTotalEccErrors', stage: 'health', field: 'volatileUncorrectedEccErrors' },
  { logical: 'deviceGetRetiredPagesPendingStatus', stage: 'health', field: 'retiredPagesPending' },
  { logical: 'deviceGetCurrentClocksEventReasons', stage: 'health', field: 'clockEventReasons' },
  { logical: 'deviceGetCurrPcieLinkGeneration', stage: 'health', field: 'pcie.generation' },
  { logical: 'deviceGetMaxPcieLinkGeneration', stage: 'health', field: 'pcie.maxGeneration' },
  { logical: 'deviceGetCurrPcieLinkWidth', stage: 'health', field: 'pcie.width' },
  { logical: 'deviceGetMaxPcieLinkWidth', stage: 'health', field: 'pcie.maxWidth' },
  { logical: 'deviceGetGpuFabricInfo', stage: 'health', field: 'fabric' },
];

/** What the library must show for one (function, code). */
export type LibraryOutcome =
  /** openNvml rejects with NvmlError { code, nvmlReturn, fn }. */
  | { kind: 'open-rejects' }
  /** Open, snapshot and close all work; nothing carries an error. */
  | { kind: 'unaffected' }
  /** `session.library[field]` is null; nothing else changes. */
  | { kind: 'library-null'; field: string }
  /** The target device's `error` carries the code; its memory is null when `memoryNull`. */
  | { kind: 'device-error'; memoryNull: boolean }
  /** `fieldErrors[field]` of the target device carries the code; the value is null / empty. */
  | { kind: 'field-error'; field: string }
  /** Memory comes from the v1 query (`source: 'v1'`, reserved null) with no error. */
  | { kind: 'memory-v1' }
  /** The target's MIG devices carry the error (`field` of each is null). */
  | { kind: 'mig-entry-error'; field: string };

/** The complete expectation for one row of the matrix. */
export interface FaultExpectation {
  library: LibraryOutcome;
  /** `gpugate check` exit code (0 ready, 69 unavailable, 75 busy). */
  cliExit: 0 | 69 | 75;
}

/** The expected outcome of injecting `code` into `row`'s function (on the target device). */
export function expectedOutcome(row: FaultRow, code: number): FaultExpectation {
  const deviceLevel = DEVICE_LEVEL_CODES.has(code);
  const fatal = FATAL_CODES.has(code);
  const field = row.field ?? '';
  switch (row.stage) {
    case 'init':
    case 'count':
      return { library: { kind: 'open-rejects' }, cliExit: 69 };
    case 'shutdown':
    case 'not-injectable':
    case 'health':
      return { library: { kind: 'unaffected' }, cliExit: 0 };
    case 'system':
      return { library: { kind: 'library-null', field }, cliExit: 0 };
    case 'handle':
      // No handle: nothing about the device can be read, for the whole session.
      return { library: { kind: 'device-error', memoryNull: true }, cliExit: fatal ? 69 : 75 };
    case 'identity':
      // Identity is descriptive; the decision needs memory, which is still read.
      return { library: { kind: 'field-error', field }, cliExit: 0 };
    case 'memory':
      if (MEMORY_V2_REFUSED_CODES.has(code)) return { library: { kind: 'memory-v1' }, cliExit: 0 };
      if (deviceLevel) return { library: { kind: 'device-error', memoryNull: true }, cliExit: 69 };
      return { library: { kind: 'field-error', field }, cliExit: fatal || code === NO_PERMISSION ? 69 : 75 };
    case 'memory-v1':
      if (deviceLevel) return { library: { kind: 'device-error', memoryNull: true }, cliExit: 69 };
      // Neither memory query supported (unified-memory systems): no memory criterion can ever be met.
      return { library: { kind: 'field-error', field }, cliExit: fatal || code === NOT_SUPPORTED || code === NO_PERMISSION ? 69 : 75 };
    case 'field':
    case 'process-list':
    case 'process-list-extra':
    case 'mig-count':
    case 'mig-handle':
      // Memory was read first and is kept; a lost GPU still ends the wait (69).
      if (deviceLevel) return { library: { kind: 'device-error', memoryNull: false }, cliExit: 69 };
      return { library: { kind: 'field-error', field }, cliExit: 0 };
    case 'mig-instance-id':
      return { library: { kind: 'mig-entry-error', field }, cliExit: 0 };
  }
}

/** The symbol gpugate falls back to for v1 memory; injected with NOT_SUPPORTED on v2 to reach it. */
export const MEMORY_V1_PREREQUISITE = { logical: 'deviceGetMemoryInfo', code: 3 } as const;
