/**
 * The public data shapes of a gpugate snapshot. Byte counts are plain numbers of bytes
 * (exact up to 8 PiB); a field that NVML could not read is `null`, never a guess.
 */

/** Which kind of process list NVML listed a process in. */
export type ProcessKind = 'compute' | 'graphics' | 'mps';

/** One process that holds a GPU (or a MIG instance), merged across NVML's three lists. */
export interface GpuProcess {
  /** Host pid as NVML reports it (it may not resolve inside a nested PID namespace). */
  pid: number;
  /** GPU memory it holds; null when NVML says "not available" (all ones). */
  usedBytes: number | null;
  /** Every list the pid appeared in. */
  kinds: ProcessKind[];
  /** MIG GPU instance id, or null when not a MIG instance. */
  gpuInstanceId: number | null;
  /** MIG compute instance id, or null when not a MIG instance. */
  computeInstanceId: number | null;
}

/**
 * What the driver says must be done before a GPU is usable again (NVML's recovery action, field
 * 230): 'none', or an action; a value gpugate does not name is `action-N`.
 */
export type RecoveryAction = 'none' | 'gpu-reset' | 'node-reboot' | 'drain-p2p' | 'drain-and-reset' | `action-${number}`;

/** Which NVML memory query produced the numbers. */
export type MemorySource = 'v2' | 'v1';

/** Device memory. With `source: 'v1'`, used includes reserved and `reservedBytes` is null. */
export interface GpuMemory {
  totalBytes: number;
  freeBytes: number;
  usedBytes: number;
  reservedBytes: number | null;
  source: MemorySource;
}

/** A failure attached to one device or one field: the rest of the snapshot is still valid. */
export interface FieldError {
  /** Stable NVML code name, e.g. 'NVML_ERROR_NOT_SUPPORTED'; 'NVML_ERROR_<number>' for unlisted codes. */
  code: string;
  /** The raw nvmlReturn_t value. */
  nvmlReturn: number;
  /** The NVML function that returned it. */
  fn: string;
  /** Human-readable explanation. */
  message: string;
}

/** A MIG device (instance) listed under its parent GPU. */
export interface MigDevice {
  /** Index among the parent's MIG device slots (holes skipped). */
  index: number;
  uuid: string;
  gpuInstanceId: number | null;
  computeInstanceId: number | null;
  memory: GpuMemory | null;
  processes?: GpuProcess[];
  error: FieldError | null;
}

/** Which NVML process-list entry point was used for a device, and the entry size actually found. */
export interface ProcessListSource {
  /** The compute list's exported symbol, e.g. 'nvmlDeviceGetComputeRunningProcesses_v3'. */
  symbol: string;
  /** Bytes per entry as measured (16, 24 or 32); null when every list was empty. */
  strideBytes: number | null;
}

/**
 * What identifies a GPU for a whole session, read once when the session opens: declared once
 * here, carried by the session's {@link GpuIdentity} and by every snapshot's {@link GpuDevice}.
 */
export interface GpuIdentityFields {
  index: number;
  /** Null when NVML could not identify the GPU (lost before the session opened: `error` says why); never an empty string. */
  uuid: string | null;
  /** Null as `uuid`. */
  name: string | null;
  /** Canonical NVML form, e.g. '00000000:1B:00.0'; null as `uuid`. */
  pciBusId: string | null;
  /** The N of /dev/nvidiaN, or null when unreadable. */
  minorNumber: number | null;
  /** e.g. '12.0', or null when unreadable. */
  computeCapability: string | null;
  /** The driver's recovery action (field 230), read once when the session opened; null when unreadable (drivers before r570; a snapshot's fieldErrors.recoveryAction says why). */
  recoveryAction: RecoveryAction | null;
}

/** One GPU as seen in one snapshot. */
export interface GpuDevice extends GpuIdentityFields {
  memory: GpuMemory | null;
  /** Present when the snapshot asked for processes (null when the list could not be read). */
  processes?: GpuProcess[] | null;
  persistenceMode: boolean | null;
  computeMode: 'default' | 'exclusive_thread' | 'prohibited' | 'exclusive_process' | null;
  /** Current MIG mode; null when not supported. */
  migMode: boolean | null;
  utilization: { gpuPercent: number; memoryPercent: number } | null;
  temperatureC: number | null;
  powerWatts: number | null;
  /** Present with `processes`: which list variant was read and the entry stride found. */
  processListSource?: ProcessListSource;
  /** MIG devices, listed when MIG mode is enabled (not with `memoryOnly`). */
  migDevices?: MigDevice[];
  /** Device-level failure (e.g. GPU lost): the fields above may all be null. */
  error: FieldError | null;
  /** Per-field failures, keyed by field name. */
  fieldErrors: Record<string, FieldError>;
}

/** Why the clocks are held below their maximum now (NVML's clock event reasons, formerly throttle reasons). */
export type ClockEventReason =
  | 'gpu_idle'
  | 'applications_clocks_setting'
  | 'sw_power_cap'
  | 'hw_slowdown'
  | 'sync_boost'
  | 'sw_thermal_slowdown'
  | 'hw_thermal_slowdown'
  | 'hw_power_brake_slowdown'
  | 'display_clock_setting';

/** Where an NVSwitch-attached GPU stands in fabric registration (nvmlGpuFabricState_t). */
export type FabricState = 'not_supported' | 'not_started' | 'in_progress' | 'completed';

/**
 * Health readings of one GPU (`session.health(index)`), read on request, never by a snapshot.
 * A field NVML could not read is null with its failure in `fieldErrors` (NVML_ERROR_NOT_SUPPORTED
 * where the GPU has no such thing, NVML_ERROR_FUNCTION_NOT_FOUND where the driver lacks the query).
 */
export interface GpuHealth {
  index: number;
  /** nvmlDeviceGetMigMode: a pending mode unlike the current one takes effect at the next GPU reset. */
  migMode: { current: boolean; pending: boolean } | null;
  /** nvmlDeviceGetRemappedRows (Ampere and later). */
  remappedRows: { correctable: number; uncorrectable: number; pending: boolean; failureOccurred: boolean } | null;
  /** Uncorrected ECC errors since the driver loaded (volatile counter); null where ECC is off or absent. */
  volatileUncorrectedEccErrors: number | null;
  /** nvmlDeviceGetRetiredPagesPendingStatus (GPUs before Ampere): pages wait for a reset to be retired. */
  retiredPagesPending: boolean | null;
  /** The clock event reasons active now, by name; unknown bits are kept in `clockEventReasonBits`. */
  clockEventReasons: ClockEventReason[] | null;
  /** The raw mask, for bits this version does not name (exact below 2^53; NVML defines bits up to 0x100). */
  clockEventReasonBits: number | null;
  pcie: { generation: number | null; maxGeneration: number | null; width: number | null; maxWidth: number | null };
  /** nvmlDeviceGetGpuFabricInfo: state, the registration's result (an NVML code name) and the clique id. */
  fabric: { state: FabricState; status: string; cliqueId: number } | null;
  /** Per-field failures, keyed by field name ('remappedRows', 'pcie.generation', 'fabric'...). */
  fieldErrors: Record<string, FieldError>;
}

/** One sample of the selected GPUs. */
export interface Snapshot {
  /** Milliseconds since the epoch when the sample was taken. */
  takenAt: number;
  devices: GpuDevice[];
}

/** What `session.library` reports about the NVML library in use. */
export interface LibraryInfo {
  /** The path that finally loaded. */
  path: string;
  driverVersion: string | null;
  nvmlVersion: string | null;
  /** e.g. '13.0', from nvmlSystemGetCudaDriverVersion. */
  cudaDriverVersion: string | null;
  /** For each logical function, the exported symbol that bound, or null if none did. */
  variants: Record<string, string | null>;
}

/** Options for `session.snapshot()`. */
export interface SnapshotOptions {
  /** Read process lists too (slower: NVML's process queries are the expensive ones). Default false. */
  processes?: boolean;
  /** Restrict to these NVML indices. Default: every device. */
  devices?: number[];
  /**
   * Read only memory (and processes when asked): modes, utilization, temperature and power are
   * null and MIG devices are not listed. The cheapest poll. Default false.
   */
  memoryOnly?: boolean;
  /**
   * With `memoryOnly`: read the compute mode too (whether a new CUDA context can be created),
   * the one mode a gate decides on. Default false.
   */
  computeMode?: boolean;
}

/** Options for `openNvml()`. */
export interface OpenNvmlOptions {
  /** Explicit path of the NVML library; else GPUGATE_NVML_LIBRARY, else the driver's usual places. */
  libraryPath?: string;
  /**
   * Deadline for each NVML call in milliseconds (default 10 000), counted from when the session's
   * NVML thread starts the call (time spent queued behind earlier calls does not count). A missed
   * deadline poisons the session.
   */
  callTimeoutMs?: number;
  /**
   * Where NVML runs: 'helper' (the default) loads the driver's library in a helper process of its
   * own, so a call stuck in the kernel or a crash inside the library takes only that process
   * down; 'in-process' runs it on a thread of this process (cheaper per call, for hot loops; a
   * hang in the kernel then keeps this process from exiting, a crash ends it).
   */
  nvmlProcess?: 'helper' | 'in-process';
}

/** An open NVML session: one init, one worker thread, handles kept until close(). */
export interface NvmlSession {
  readonly library: LibraryInfo;
  /** True once closed or poisoned (a hung call); every later call rejects. */
  readonly closed: boolean;
  /** Take a sample on the NVML worker thread; rejects with NvmlError on a fatal failure or a missed deadline. */
  snapshot(options?: SnapshotOptions): Promise<Snapshot>;
  /** The same sample, read on the calling thread. Blocking: the deadline cannot be enforced here. */
  snapshotSync(options?: SnapshotOptions): Snapshot;
  /** Shut NVML down once; waits for pending work (or abandons a hung call). */
  close(): Promise<void>;
}

/** What identifies a GPU for a whole session: read once when the session opens. */
export interface GpuIdentity extends GpuIdentityFields {
  /** Set when even the device handle could not be obtained: every snapshot reports this error for it. */
  error: FieldError | null;
}

/** The session `openNvml()` returns: an {@link NvmlSession} plus the raw memory fast path. */
export interface NvmlMemoryReader extends NvmlSession {
  /** Number of devices NVML reported when the session opened. */
  readonly deviceCount: number;
  /** Every device NVML reported when the session opened, in index order (no NVML call). */
  readonly devices: readonly GpuIdentity[];
  /**
   * Fastest poll, blocking: the memory of every device into `out` (a Float64Array of
   * `deviceCount * 5`: totalBytes, freeBytes, usedBytes, reservedBytes (NaN for v1 / unknown),
   * nvmlReturn (0 = ok)), allocated when omitted. NaN marks unreadable values.
   */
  readMemorySync(out?: Float64Array): Float64Array;
  /**
   * The health readings of device `index` (an NVML index below `deviceCount`) on the NVML thread,
   * under the session's deadline: remapped rows, ECC, retired pages, clock event reasons, the PCIe
   * link, MIG mode pending, fabric state. What `gpugate doctor` judges.
   */
  health(index: number): Promise<GpuHealth>;
}
