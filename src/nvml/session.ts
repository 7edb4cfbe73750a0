/**
 * openNvml(): the typed session API over the native addon. Deadlines live here: a call's
 * `callTimeoutMs` counts from the moment the session's NVML thread starts it (not while it waits
 * behind earlier calls), checked by one watchdog timer per session for all its pending calls. A
 * missed deadline rejects with GPUGATE_TIMEOUT and poisons the session (the stuck NVML thread is
 * abandoned, so the process can still exit); every other call then rejects with
 * GPUGATE_SESSION_CLOSED. At most MAX_PENDING_CALLS calls wait per session; more are refused at
 * once with GPUGATE_QUEUE_FULL.
 *
 * Where NVML runs (`nvmlProcess`): by default in the session's helper process (native/helper/),
 * so a call stuck in the kernel or a crash inside the library costs this process an error, not its
 * life: a missed deadline kills and abandons the helper (the error carries its pid and /proc state),
 * and a helper that dies rejects its call with GPUGATE_NVML_HELPER_CRASHED and closes the session.
 * 'in-process' keeps NVML on a thread of this process (hot loops).
 */
import { loadBinding } from './binding';
import { ConfigError } from '../config-error';
import {
  GPUGATE_NVML_HELPER_CRASHED,
  GPUGATE_QUEUE_FULL,
  GPUGATE_SESSION_CLOSED,
  GPUGATE_TIMEOUT,
  NvmlError,
} from './nvml-error';
import { DEFAULT_CALL_TIMEOUT_MS, MAX_CALL_TIMEOUT_MS } from './call-timeout';
import { resolveLibraryPath } from './library-path';
import type {
  NativeBinding,
  NativeEncodedSnapshot,
  NativeOpenResult,
  NativeSessionHandle,
} from './native-binding';
import { decodeHealth } from './health-decode';
import { SnapshotDecoder, identityOf } from './snapshot-decode';
import { wireLayoutOf } from './wire-layout';
import { fromAddon, isAddonCode, openError, stuckCall } from './session-errors';
import type { GpuHealth, GpuIdentity, LibraryInfo, NvmlMemoryReader, OpenNvmlOptions, Snapshot, SnapshotOptions } from '../types';
import { checkedWhereUsed, checkOptionKeys, type OptionTable } from '../option-keys';

/**
 * The most asynchronous calls (snapshots, running or queued) one session holds at once. Each
 * waits its turn on the session's one NVML thread; a call beyond this is refused at once with
 * GPUGATE_QUEUE_FULL instead of growing the queue without bound.
 */
export const MAX_PENDING_CALLS = 1024;

/** openNvml's keys; each value is checked where it is used (checkTimeout, resolveLibraryPath). */
const OPEN_OPTION_CHECKS: OptionTable<OpenNvmlOptions> = {
  libraryPath: checkedWhereUsed,
  callTimeoutMs: checkedWhereUsed,
  nvmlProcess: checkedWhereUsed,
};

/** Where a session's NVML runs (OpenNvmlOptions.nvmlProcess); the first is the default. */
const NVML_PROCESS_MODES = ['helper', 'in-process'] as const;
type NvmlProcessMode = (typeof NVML_PROCESS_MODES)[number];

function checkNvmlProcess(value: unknown): NvmlProcessMode {
  if (value === undefined) return NVML_PROCESS_MODES[0];
  if (!(NVML_PROCESS_MODES as readonly unknown[]).includes(value)) {
    throw new ConfigError(
      'nvmlProcess',
      `gpugate: option 'nvmlProcess' must be one of ${NVML_PROCESS_MODES.map((mode) => `'${mode}'`).join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value as NvmlProcessMode;
}

function checkTimeout(value: unknown): number {
  if (value === undefined) return DEFAULT_CALL_TIMEOUT_MS;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_CALL_TIMEOUT_MS) {
    throw new ConfigError(
      'callTimeoutMs',
      `gpugate: option 'callTimeoutMs' must be a number of milliseconds between 1 and ${MAX_CALL_TIMEOUT_MS}, got ${String(value)}`,
    );
  }
  return value;
}

function cudaVersionText(version: number | null): string | null {
  if (version === null) return null;
  return `${Math.floor(version / 1000)}.${Math.floor((version % 1000) / 10)}`;
}

/** Races `promise` against a ref'd timer; on expiry calls `onTimeout` and rejects with its error. */
function withDeadline<T>(promise: Promise<T>, timeoutMs: number, onTimeout: () => NvmlError): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), timeoutMs);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

interface CheckedSnapshotOptions {
  processes: boolean;
  memoryOnly: boolean;
  computeMode: boolean;
  devices: number[] | null;
}

/** An asynchronous call the session waits for: settled by the addon, or rejected by the watchdog. */
interface PendingCall {
  what: string;
  reject(error: Error): void;
}

class Session implements NvmlMemoryReader {
  readonly library: LibraryInfo;
  readonly deviceCount: number;
  readonly devices: readonly GpuIdentity[];
  readonly #binding: NativeBinding;
  readonly #handle: NativeSessionHandle;
  readonly #timeoutMs: number;
  readonly #decoder: SnapshotDecoder;
  /** Reused by the memory-only fast path of snapshotSync (one read of every device). */
  readonly #memoryBuffer: Float64Array;
  #closed = false;
  #poisonedBy: NvmlError | null = null;
  /** Calls handed to the NVML thread and not yet settled, oldest first (the thread runs them in order). */
  readonly #pending = new Set<PendingCall>();
  /** The one deadline timer for every pending call; ref'd only while calls are pending. */
  #watchdog: NodeJS.Timeout | null = null;

  constructor(binding: NativeBinding, handle: NativeSessionHandle, opened: NativeOpenResult, timeoutMs: number) {
    this.#binding = binding;
    this.#handle = handle;
    this.#timeoutMs = timeoutMs;
    this.deviceCount = opened.devices.length;
    this.#decoder = new SnapshotDecoder(wireLayoutOf(binding), opened.devices);
    this.#memoryBuffer = new Float64Array(opened.devices.length * this.#decoder.memorySlots);
    this.devices = opened.devices.map(identityOf);
    this.library = {
      path: opened.path,
      driverVersion: opened.driverVersion,
      nvmlVersion: opened.nvmlVersion,
      cudaDriverVersion: cudaVersionText(opened.cudaDriverVersion),
      variants: opened.variants,
    };
  }

  get closed(): boolean {
    return this.#closed;
  }

  #closedError(what: string): NvmlError {
    if (this.#poisonedBy !== null) {
      // Closed by the poisoning: this call never ran, so it did not time out itself; the timeout (or crash) is its cause.
      const why = this.#poisonedBy.code === GPUGATE_NVML_HELPER_CRASHED ? 'its NVML helper process died' : 'an earlier NVML call missed its deadline';
      return new NvmlError({
        code: GPUGATE_SESSION_CLOSED,
        nvmlReturn: null,
        fn: what,
        message: `gpugate: ${what}: the session is closed since ${why} (${this.#poisonedBy.message})`,
        cause: this.#poisonedBy,
      });
    }
    return new NvmlError({
      code: GPUGATE_SESSION_CLOSED,
      nvmlReturn: null,
      fn: what,
      message: `gpugate: ${what}: the NVML session is closed; open a new one with openNvml()`,
    });
  }

  /** Poisons the session; `late` (the call that missed its deadline) is rejected first, then every other pending call. */
  #poison(what: string, late?: PendingCall): NvmlError {
    const stuck = stuckCall(this.#binding, this.#handle);
    const error = new NvmlError({
      code: GPUGATE_TIMEOUT,
      nvmlReturn: null,
      fn: stuck.fn ?? what,
      device: stuck.device,
      helperPid: stuck.helperPid,
      message:
        `gpugate: ${what} did not answer within ${this.#timeoutMs} ms: ${stuck.text}. ` +
        'The session is closed and its NVML thread abandoned; check `dmesg` for NVIDIA Xid errors and whether nvidia-smi also hangs.' +
        stuck.helperText,
    });
    if (this.#poisonedBy === null) {
      this.#closed = true;
      this.#poisonedBy = error;
      this.#binding.abandon(this.#handle);
      // The call the NVML thread is stuck in (the oldest pending: it runs them in order) timed out,
      // also when a blocking call queued behind it is what ran out of time; the others never ran.
      const inThread = late ?? (stuck.fn === null ? undefined : this.#pending.values().next().value);
      if (inThread !== undefined) {
        this.#pending.delete(inThread);
        inThread.reject(inThread.what === 'close' ? this.#closeTimeoutError() : error);
      }
      this.#rejectPending();
    }
    return error;
  }

  /**
   * Waits for `native` as one pending call: the addon settles it, or the watchdog rejects it when
   * the NVML thread has spent longer than the deadline in one call.
   */
  #track<T>(native: Promise<T>, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: PendingCall = { what, reject };
      if (this.#pending.size === 0) this.#watchdogBusy();
      this.#pending.add(call);
      native.then(
        (value) => {
          if (!this.#settled(call)) return;
          resolve(value);
        },
        (error: unknown) => {
          if (!this.#settled(call)) return;
          reject(this.#failed(error, what));
        },
      );
    });
  }

  /**
   * A call's failure as its NvmlError; a helper that died closes the session (the addon has
   * closed its side already), and every other pending call is rejected with that as the cause.
   */
  #failed(error: unknown, what: string): Error {
    const failure = fromAddon(error, what);
    if (failure instanceof NvmlError && failure.code === GPUGATE_NVML_HELPER_CRASHED && this.#poisonedBy === null) {
      this.#closed = true;
      this.#poisonedBy = failure;
      this.#binding.abandon(this.#handle); // ends the session's worker thread; nothing is left to kill
      this.#rejectPending();
    }
    return failure;
  }

  /** False when the watchdog already rejected `call`. */
  #settled(call: PendingCall): boolean {
    if (!this.#pending.delete(call)) return false;
    if (this.#pending.size === 0) this.#watchdog?.unref();
    return true;
  }

  #watchdogBusy(): void {
    if (this.#watchdog === null) this.#watchdog = setTimeout(this.#onWatchdog, this.#timeoutMs);
    else this.#watchdog.ref();
  }

  /** Checks how long the NVML thread has been in its current call; poisons at the deadline, else looks again when it would be due. */
  readonly #onWatchdog = (): void => {
    this.#watchdog = null;
    if (this.#pending.size === 0 || this.#poisonedBy !== null) return;
    const { runningMs } = this.#binding.currentCall(this.#handle);
    if (runningMs !== null && runningMs >= this.#timeoutMs) {
      // The oldest pending call is the one running (the thread takes them in order): it gets the diagnosis.
      const stuck = this.#pending.values().next().value as PendingCall;
      this.#poison(stuck.what, stuck);
      return;
    }
    const dueInMs = runningMs === null ? this.#timeoutMs : this.#timeoutMs - runningMs;
    this.#watchdog = setTimeout(this.#onWatchdog, Math.max(1, Math.ceil(dueInMs)));
  };

  /** After poisoning: every call still pending is rejected at once (the addon will never answer them). */
  #rejectPending(): void {
    const calls = [...this.#pending];
    this.#pending.clear();
    if (this.#watchdog !== null) clearTimeout(this.#watchdog);
    this.#watchdog = null;
    for (const call of calls) call.reject(call.what === 'close' ? this.#closeTimeoutError() : this.#closedError(call.what));
  }

  #closeTimeoutError(): NvmlError {
    return new NvmlError({
      code: GPUGATE_TIMEOUT,
      nvmlReturn: null,
      fn: 'nvmlShutdown',
      message: `gpugate: close did not finish within ${this.#timeoutMs} ms (a pending call or nvmlShutdown is stuck); its NVML thread was abandoned`,
      cause: this.#poisonedBy ?? undefined,
    });
  }

  #queueFullError(what: string): NvmlError {
    return new NvmlError({
      code: GPUGATE_QUEUE_FULL,
      nvmlReturn: null,
      fn: what,
      message:
        `gpugate: ${what}: ${MAX_PENDING_CALLS} calls are already pending on this session (running or queued on its NVML thread); ` +
        'this one was refused at once and the session is unaffected. Await earlier calls before starting more.',
    });
  }

  #checkOptions(options: unknown): CheckedSnapshotOptions {
    if (options === undefined) return { processes: false, memoryOnly: false, computeMode: false, devices: null };
    if (typeof options !== 'object' || options === null) {
      throw new ConfigError('options', 'gpugate: snapshot options must be an object like { processes: true, devices: [0, 1] }');
    }
    const { processes, memoryOnly, computeMode, devices } = options as Record<string, unknown>;
    for (const [name, value] of [
      ['processes', processes],
      ['memoryOnly', memoryOnly],
      ['computeMode', computeMode],
    ] as const) {
      if (value !== undefined && typeof value !== 'boolean') {
        throw new ConfigError(name, `gpugate: snapshot option '${name}' must be a boolean, got ${JSON.stringify(value)}`);
      }
    }
    let indices: number[] | null = null;
    if (devices !== undefined) {
      if (!Array.isArray(devices)) {
        throw new ConfigError('devices', `gpugate: snapshot option 'devices' must be an array of NVML indices, got ${JSON.stringify(devices)}`);
      }
      for (const index of devices as unknown[]) {
        if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= this.deviceCount) {
          throw new ConfigError(
            'devices',
            `gpugate: snapshot option 'devices' contains ${JSON.stringify(index)}, which is not a device index of this host (0..${this.deviceCount - 1})`,
          );
        }
      }
      indices = devices as number[];
    }
    return { processes: processes === true, memoryOnly: memoryOnly === true, computeMode: computeMode === true, devices: indices };
  }

  #decode(encoded: NativeEncodedSnapshot, processes: boolean, takenAt: number): Snapshot {
    return this.#decoder.decode(encoded, { processes, takenAt });
  }

  snapshot(options?: SnapshotOptions): Promise<Snapshot> {
    if (this.#closed) return Promise.reject(this.#closedError('snapshot'));
    if (this.#pending.size >= MAX_PENDING_CALLS) return Promise.reject(this.#queueFullError('snapshot'));
    let checked: CheckedSnapshotOptions;
    let pending: Promise<NativeEncodedSnapshot>;
    const takenAt = Date.now();
    try {
      checked = this.#checkOptions(options);
      pending = this.#binding.snapshot(this.#handle, checked.processes, checked.memoryOnly, checked.devices, checked.computeMode);
    } catch (error) {
      // An async API reports every failure through its promise, argument errors included.
      return Promise.reject(fromAddon(error, 'snapshot'));
    }
    const what = checked.processes ? 'snapshot (memory and process lists)' : 'snapshot';
    return this.#track(pending, what).then((encoded) => this.#decode(encoded, checked.processes, takenAt));
  }

  snapshotSync(options?: SnapshotOptions): Snapshot {
    if (this.#closed) throw this.#closedError('snapshotSync');
    const checked = this.#checkOptions(options);
    const takenAt = Date.now();
    if (checked.memoryOnly && !checked.processes && !checked.computeMode && checked.devices === null) {
      // The cheapest full memory-only snapshot: one native read of every device into a reused array.
      const fast = this.#decoder.decodeMemory(this.readMemorySync(this.#memoryBuffer), takenAt);
      if (fast !== null) return fast;
    }
    try {
      const encoded = this.#binding.snapshotSync(
        this.#handle,
        checked.processes,
        checked.memoryOnly,
        checked.devices,
        this.#timeoutMs,
        checked.computeMode,
      );
      return this.#decode(encoded, checked.processes, takenAt);
    } catch (error) {
      if ((error as { code?: unknown }).code === GPUGATE_TIMEOUT) throw this.#poison('snapshotSync');
      throw this.#failed(error, 'snapshotSync');
    }
  }

  readMemorySync(out?: Float64Array): Float64Array {
    if (this.#closed) throw this.#closedError('readMemorySync');
    const needed = this.deviceCount * this.#decoder.memorySlots;
    const target = out ?? new Float64Array(needed);
    if (!(target instanceof Float64Array)) {
      throw new ConfigError('out', 'gpugate: readMemorySync(out): out must be a Float64Array');
    }
    try {
      this.#binding.readMemory(this.#handle, target, this.#timeoutMs);
    } catch (error) {
      if ((error as { code?: unknown }).code === GPUGATE_TIMEOUT) throw this.#poison('readMemorySync');
      throw this.#failed(error, 'readMemorySync');
    }
    return target;
  }

  health(index: number): Promise<GpuHealth> {
    if (this.#closed) return Promise.reject(this.#closedError('health'));
    if (this.#pending.size >= MAX_PENDING_CALLS) return Promise.reject(this.#queueFullError('health'));
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= this.deviceCount) {
      return Promise.reject(new ConfigError(
        'index',
        `gpugate: health(index): ${JSON.stringify(index)} is not a device index of this host (0..${this.deviceCount - 1})`,
      ));
    }
    let pending;
    try {
      pending = this.#binding.health(this.#handle, index);
    } catch (error) {
      return Promise.reject(fromAddon(error, 'health'));
    }
    return this.#track(pending, `health readings of GPU ${index}`).then(decodeHealth);
  }

  /** Resolves once the calls already pending have settled and NVML is shut down (each under its own deadline). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#track(this.#binding.close(this.#handle), 'close');
  }
}

/**
 * Opens an NVML session: loads the library (option `libraryPath`, else GPUGATE_NVML_LIBRARY,
 * else the driver's usual places), initialises NVML once and reads every device's identity.
 * Rejects with an {@link NvmlError} (GPUGATE_LIBRARY_NOT_FOUND, NVML_ERROR_DRIVER_NOT_LOADED,
 * GPUGATE_TIMEOUT...) whose message says what to do.
 */
export async function openNvml(options: OpenNvmlOptions = {}): Promise<NvmlMemoryReader> {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError('options', 'gpugate: openNvml(options): options must be an object like { libraryPath, callTimeoutMs }');
  }
  checkOptionKeys<OpenNvmlOptions>('openNvml(options)', options, OPEN_OPTION_CHECKS, '{ libraryPath, callTimeoutMs, nvmlProcess }');
  const timeoutMs = checkTimeout(options.callTimeoutMs);
  const nvmlProcess = checkNvmlProcess(options.nvmlProcess);
  const choice = resolveLibraryPath(options.libraryPath);
  const binding = loadBinding();
  wireLayoutOf(binding); // a stale addon is refused here, before NVML is opened
  let handle: NativeSessionHandle;
  try {
    handle = binding.createSession(nvmlProcess);
  } catch (error) {
    throw fromAddon(error, 'open'); // GPUGATE_NVML_HELPER_MISSING: the helper file cannot be run
  }
  let timedOut = false;
  let opened: NativeOpenResult;
  try {
    opened = await withDeadline(binding.open(handle, choice.path), timeoutMs, () => {
      timedOut = true;
      const stuck = stuckCall(binding, handle);
      binding.abandon(handle);
      return new NvmlError({
        code: GPUGATE_TIMEOUT,
        nvmlReturn: null,
        fn: stuck.fn ?? 'dlopen',
        device: stuck.device,
        helperPid: stuck.helperPid,
        message:
          `gpugate: opening NVML (dlopen, nvmlInit, device handles) did not finish within ${timeoutMs} ms: ${stuck.text} ` +
          '(check `dmesg` for Xid errors and whether nvidia-smi hangs too); the NVML thread was abandoned.' +
          stuck.helperText,
      });
    });
  } catch (error) {
    if (timedOut) throw error;
    // Release the worker thread; a close that does not answer in time is abandoned too.
    await withDeadline(binding.close(handle), timeoutMs, () => {
      binding.abandon(handle); // a stuck close: never wait on that thread again
      return openError(error, choice);
    }).catch(() => undefined);
    // The addon's own failures (a helper that died while opening) keep their code.
    if (isAddonCode((error as { code?: unknown }).code)) throw fromAddon(error, 'open');
    throw openError(error, choice);
  }
  return new Session(binding, handle, opened, timeoutMs);
}
