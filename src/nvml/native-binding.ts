/**
 * The shape of the native addon (build/Release/gpugate.node) as TypeScript sees it. Every native
 * export appears in three places: the addon's table (native/addon.cc), {@link NATIVE_EXPORT_NAMES} /
 * {@link NativeBinding} here, and the contract test that compares them with the loaded addon.
 */

/** An opaque session handle created by the addon (a type-tagged external). */
export interface NativeSessionHandle {
  readonly __gpugateNativeSession: unique symbol;
}

/** A failed NVML call as the addon reports it (per device or per field). */
export interface NativeCallError {
  field: string;
  nvmlReturn: number;
  fn: string;
  message: string;
}

/** A device's identity, read once when the session opened. */
export interface NativeDeviceIdentity {
  index: number;
  name: string;
  uuid: string;
  pciBusId: string;
  minorNumber: number | null;
  computeCapability: [number, number] | null;
  /** NVML's raw recovery action value (field 230), or null when it could not be read. */
  recoveryAction: number | null;
  /** Set when even the device handle could not be obtained. */
  error: NativeCallError | null;
  fieldErrors: NativeCallError[];
}

/** What `open()` resolves with. */
export interface NativeOpenResult {
  path: string;
  driverVersion: string | null;
  nvmlVersion: string | null;
  /** e.g. 13000 for CUDA 13.0. */
  cudaDriverVersion: number | null;
  variants: Record<string, string | null>;
  devices: NativeDeviceIdentity[];
}

/** The error `open()` rejects with (a plain Error with these properties). */
export interface NativeOpenError extends Error {
  kind: 'library' | 'function' | 'nvml';
  nvmlReturn: number;
  fn: string | null;
  attempts: Array<{ path: string; error: string }>;
  simulatorError: string | null;
}

/** A snapshot in the flat encoding (records as {@link NativeWireLayout} names them). */
export interface NativeEncodedSnapshot {
  numbers: Float64Array;
  strings: string[];
}

/** One health query as the addon reports it: NVML's return code, the symbol called, and the values read (empty on failure). */
export interface NativeHealthField {
  nvmlReturn: number;
  fn: string;
  /** The library's text for a failure; null on success. */
  message: string | null;
  values: Record<string, number>;
}

/** What `health()` resolves with: one entry per query (see native/health.h for the names). */
export interface NativeHealthReading {
  index: number;
  fields: Record<string, NativeHealthField>;
}

/**
 * The wire layout the addon reports: for each record kind, its slot names in position order
 * (native/wire_layout.h); for processKinds, the kind each bit of a process's `kinds` slot stands
 * for. src/nvml/wire-layout.ts resolves the names it reads to positions.
 */
export interface NativeWireLayout {
  header: string[];
  device: string[];
  mig: string[];
  error: string[];
  process: string[];
  memory: string[];
  processKinds: string[];
}

/** What /proc says of a session's NVML helper process (null fields: unreadable or gone). */
export interface NativeHelperState {
  pid: number;
  /** /proc/PID/stat's state letter: `S` waiting, `R` running, `D` in uninterruptible sleep (stuck in the kernel). */
  state: string | null;
  /** /proc/PID/wchan: the kernel function it sleeps in. */
  wchan: string | null;
  /** Its command line: `gpugate-nvml-helper idle` or `gpugate-nvml-helper in <fn> gpu <n|-> since <unixMs>`. */
  commandLine: string | null;
}

/** The functions the addon exports. */
export interface NativeBinding {
  /**
   * Starts a session's NVML worker thread; nothing is loaded until `open`. `nvmlProcess` (default
   * 'helper'): NVML runs in the helper process spawned at `open` (its file beside the addon is
   * checked here: throws an Error with code GPUGATE_NVML_HELPER_MISSING), or in this process.
   */
  createSession(nvmlProcess?: 'helper' | 'in-process'): NativeSessionHandle;
  /** Loads the library (explicit path, or the default search when null), inits NVML, reads identities. Once per handle. */
  open(handle: NativeSessionHandle, libraryPath: string | null): Promise<NativeOpenResult>;
  /** A snapshot on the worker thread. `devices` are NVML indices (null = all); `computeMode` with `memoryOnly` reads the compute mode too. */
  snapshot(
    handle: NativeSessionHandle,
    processes: boolean,
    memoryOnly: boolean,
    devices: number[] | null,
    computeMode?: boolean,
  ): Promise<NativeEncodedSnapshot>;
  /** The same on the calling thread (blocking; waits at most `lockTimeoutMs` for the session's NVML lock). */
  snapshotSync(
    handle: NativeSessionHandle,
    processes: boolean,
    memoryOnly: boolean,
    devices: number[] | null,
    lockTimeoutMs: number,
    computeMode?: boolean,
  ): NativeEncodedSnapshot;
  /** Fastest path: memory of every device into `out` (one `memory` record each). Returns the device count. */
  readMemory(handle: NativeSessionHandle, out: Float64Array, lockTimeoutMs: number): number;
  /** The health readings of one device (by NVML index) on the worker thread: each query's values or its return code. */
  health(handle: NativeSessionHandle, device: number): Promise<NativeHealthReading>;
  /** nvmlShutdown (if init succeeded), then ends the worker thread. */
  close(handle: NativeSessionHandle): Promise<void>;
  /** Poisons a session whose call missed its deadline: the stuck worker is detached, never joined, and nothing of the session calls into JavaScript again. */
  abandon(handle: NativeSessionHandle): void;
  /**
   * The NVML function the session's thread called last and the device it was reading (where a
   * late call is stuck), and how long the thread has been in its current task (null between
   * tasks): what the per-call deadline is measured against.
   */
  currentCall(handle: NativeSessionHandle): {
    fn: string | null;
    device: number | null;
    runningMs: number | null;
    /** The helper process of a helper-mode session once spawned (absent before and in the in-process mode): its pid and what /proc says (state `D`: stuck in the kernel). */
    helper?: NativeHelperState;
  };
  /** Sends one unix datagram (sd_notify protocol); a leading '@' is the abstract namespace. Throws on failure. */
  sendNotify(socketPath: string, text: string): void;
  /** pidfd_open(pid, 0): a descriptor bound to that process for as long as it is open. Throws an Error with `errno` (ENOSYS: no pidfds). */
  pidfdOpen(pid: number): number;
  /** pidfd_send_signal(fd, signal): signals the process the descriptor was opened on, never a reused pid. Throws with `errno` (ESRCH: gone). */
  pidfdSendSignal(fd: number, signal: number): void;
  /** waitpid(pid, WNOHANG) for one named child: true when it was reaped. */
  reapChild(pid: number): boolean;
  /** flock(fd, LOCK_EX | LOCK_NB): true when now held, false when another open file holds it. Throws with `errno` otherwise. Closing fd releases it. */
  flockExclusive(fd: number): boolean;
  /** Records si_code / si_pid of every delivery of `signal` in front of its installed handler; false when already watched. */
  watchSignalSource(signal: number): boolean;
  /** The siginfo of the latest delivery of `signal` since it was watched, or null. */
  lastSignalSource(signal: number): { code: number; pid: number } | null;
  /** 'NVML_ERROR_GPU_IS_LOST' etc., 'NVML_ERROR_<n>' for unlisted codes. */
  codeName(code: number): string;
  /** Each record kind's slot names in position order. */
  encodingLayout(): NativeWireLayout;
  /** Where the loader looks when no explicit path is given, in order. */
  defaultLibraryCandidates(): string[];
}

/** Every name the addon exports, in its table order. */
export const NATIVE_EXPORT_NAMES = [
  'createSession',
  'open',
  'snapshot',
  'snapshotSync',
  'readMemory',
  'health',
  'close',
  'abandon',
  'currentCall',
  'sendNotify',
  'pidfdOpen',
  'pidfdSendSignal',
  'reapChild',
  'flockExclusive',
  'watchSignalSource',
  'lastSignalSource',
  'codeName',
  'encodingLayout',
  'defaultLibraryCandidates',
] as const satisfies ReadonlyArray<keyof NativeBinding>;

// Compile-time check that the list names every member of the interface (and nothing else).
type MissingFromList = Exclude<keyof NativeBinding, (typeof NATIVE_EXPORT_NAMES)[number]>;
const exportListIsComplete: MissingFromList extends never ? true : MissingFromList = true;
void exportListIsComplete;
