/**
 * runDoctor(): quick, read-only health checks of a GPU host in the spirit of DCGM's level-1
 * diagnostic: the driver, every GPU, the kernel's NVIDIA messages and the host, plus any checks
 * the caller adds (a systemd unit's configuration). Changes nothing; reports every finding as a
 * {@link DoctorCheck}. NVML failing to open is a finding too, not an exception.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readKernelLog } from '../host/kernel-log';
import { loadBinding } from '../nvml/binding';
import { resolveLibraryPath } from '../nvml/library-path';
import { DEFAULT_CALL_TIMEOUT_MS } from '../nvml/call-timeout';
import { GPUGATE_SESSION_CLOSED, GPUGATE_TIMEOUT, NvmlError } from '../nvml/nvml-error';
import { DriverStuckError, findStuckDriver, secondsText, stuckCallText } from '../gate/stuck-driver';
import { openNvml } from '../nvml/session';
import type { GpuDevice, LibraryInfo, NvmlMemoryReader } from '../types';
import { type DoctorCheck, type DoctorStatus, worstStatus } from './doctor-check';
import { driverChecks, KERNEL_MODULE_VERSION_PATH, type DriverFacts, type NvmlOpenFailure } from './driver-checks';
import { gpuChecks, type HealthOutcome } from './gpu-checks';
import { hostChecks } from './host-checks';
import { kernelLogChecks } from './kernel-log-checks';
import { checkedWhereUsed, checkOptionKeys, type OptionTable } from '../option-keys';

/** Options of {@link runDoctor}. Every path has the host's default; tests and chroots point them elsewhere. */
export interface DoctorOptions {
  /** An open session to use (left open); else one is opened with `libraryPath` / `callTimeoutMs` and closed. */
  session?: NvmlMemoryReader;
  libraryPath?: string;
  callTimeoutMs?: number;
  /** A kernel log to read instead of /dev/kmsg (then `journalctl -k -b`): a saved `dmesg` or `journalctl -k` output. */
  kernelLogPath?: string;
  /** Default /proc/driver/nvidia/version. */
  kernelModuleVersionPath?: string;
  /** Where the driver's device nodes are; default /dev. */
  devDir?: string;
  /** Default /proc. */
  procRoot?: string;
  /** The environment whose CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER are judged; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** More checks to run and report with the rest (e.g. a systemd unit's configuration). */
  unitChecks?: (devices: readonly GpuDevice[]) => Promise<readonly DoctorCheck[]>;
}

/** What {@link runDoctor} found. */
export interface DoctorReport {
  /** The worst status of all checks. */
  status: DoctorStatus;
  /** Every check, in order: driver, each GPU, kernel log, host, then the caller's. */
  checks: DoctorCheck[];
  /** The NVML library's versions; null when NVML could not be opened. */
  library: LibraryInfo | null;
  /** GPUs NVML lists (0 when it could not be opened). */
  gpuCount: number;
  /** Milliseconds since the epoch when the checks started. */
  takenAt: number;
}

/** What a missed deadline says: the call, and that it has been stuck at least the deadline. */
function timedOutText(error: NvmlError, deadlineMs: number, cause: NvmlError | null): string {
  const call = cause ?? error;
  const gpu = call.device === null ? '' : ` on GPU ${call.device}`;
  return `stuck in the kernel for ${secondsText(deadlineMs)} s in ${call.fn ?? 'an NVML call'}${gpu}: no answer within its ${deadlineMs} ms deadline`;
}

function failureOf(error: unknown, deadlineMs: number): NvmlOpenFailure {
  if (error instanceof DriverStuckError) {
    return { code: error.code, nvmlReturn: null, fn: error.fn, message: error.message, notResponding: stuckCallText({ helper: error.helper, others: 0, stuckForMs: error.stuckForMs }), helperPid: error.helperPid };
  }
  if (error instanceof NvmlError) {
    const failure: NvmlOpenFailure = { code: error.code, nvmlReturn: error.nvmlReturn, fn: error.fn, message: error.message };
    // A later call of a session poisoned by a hung one is closed: the hung call (its cause) is what to name.
    const cause = error.code === GPUGATE_SESSION_CLOSED && error.cause instanceof NvmlError && error.cause.code === GPUGATE_TIMEOUT ? error.cause : null;
    if (error.code === GPUGATE_TIMEOUT || cause !== null) {
      failure.notResponding = timedOutText(error, deadlineMs, cause);
      failure.helperPid = (cause ?? error).helperPid;
    }
    return failure;
  }
  const e = error as { code?: unknown; message?: unknown };
  return { code: typeof e.code === 'string' ? e.code : 'GPUGATE_NATIVE_FAILURE', nvmlReturn: null, fn: null, message: typeof e.message === 'string' ? e.message : String(error) };
}

function realPath(file: string): string | null {
  try {
    return fs.realpathSync(file);
  } catch {
    return null;
  }
}

/** The library file that loaded, or, when none did, the one that would have: symlinks resolved. */
function libraryFileOf(library: LibraryInfo | null, libraryPath: string | undefined, env: NodeJS.ProcessEnv): string | null {
  if (library !== null) return realPath(library.path) ?? library.path;
  let choice;
  try {
    choice = resolveLibraryPath(libraryPath, env);
  } catch {
    return null;  // a malformed option: openNvml already reported it as the open failure
  }
  if (choice.path !== null) return realPath(choice.path);
  for (const candidate of loadBinding().defaultLibraryCandidates()) {
    if (!path.isAbsolute(candidate)) continue;
    const found = realPath(candidate);
    if (found !== null) return found;
  }
  return null;
}

function readKernelModule(file: string): DriverFacts['kernelModule'] {
  try {
    return { kind: 'ok', path: file, text: fs.readFileSync(file, 'utf8') };
  } catch (error) {
    return { kind: 'unreadable', path: file, reason: error instanceof Error ? error.message : String(error) };
  }
}

/** The GPUs from one full snapshot, then one health call per reachable GPU, in turn. */
async function readGpus(session: NvmlMemoryReader, deadlineMs: number): Promise<{ devices: GpuDevice[]; health: HealthOutcome[] }> {
  const snapshot = await session.snapshot();
  const health: HealthOutcome[] = [];
  for (const device of snapshot.devices) {
    if (device.error !== null) {
      health.push({ kind: 'skipped' });
      continue;
    }
    try {
      health.push({ kind: 'ok', health: await session.health(device.index) });
    } catch (error) {
      health.push({ kind: 'failed', failure: failureOf(error, deadlineMs) });
    }
  }
  return { devices: snapshot.devices, health };
}

/** runDoctor's keys; each value is read where it is used. */
const DOCTOR_OPTION_CHECKS: OptionTable<DoctorOptions> = {
  session: checkedWhereUsed,
  libraryPath: checkedWhereUsed,
  callTimeoutMs: checkedWhereUsed,
  kernelLogPath: checkedWhereUsed,
  kernelModuleVersionPath: checkedWhereUsed,
  devDir: checkedWhereUsed,
  procRoot: checkedWhereUsed,
  env: checkedWhereUsed,
  unitChecks: checkedWhereUsed,
};

/** Runs every check; never throws for what it finds (NVML missing, a lost GPU, an unreadable log are findings). */
export async function runDoctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  checkOptionKeys<DoctorOptions>('runDoctor(options)', options, DOCTOR_OPTION_CHECKS, '{ libraryPath, kernelLogPath }');
  const takenAt = Date.now();
  const env = options.env ?? process.env;
  let session: NvmlMemoryReader | null = options.session ?? null;
  let openFailure: NvmlOpenFailure | null = null;
  const deadlineMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  if (session === null) {
    // An earlier helper stuck in the driver: opening NVML would hang behind it; report it instead.
    const stuck = await findStuckDriver({ stuckAfterMs: deadlineMs, ...(options.procRoot !== undefined ? { procRoot: options.procRoot } : {}) });
    if (stuck !== null) openFailure = failureOf(new DriverStuckError(stuck), deadlineMs);
  }
  if (session === null && openFailure === null) {
    try {
      session = await openNvml({
        ...(options.libraryPath !== undefined ? { libraryPath: options.libraryPath } : {}),
        ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
      });
    } catch (error) {
      openFailure = failureOf(error, deadlineMs);
    }
  }
  try {
    const library = session?.library ?? null;
    let devices: GpuDevice[] = [];
    let health: HealthOutcome[] = [];
    const checks: DoctorCheck[] = [];
    let readFailure: NvmlOpenFailure | null = null;
    if (session !== null) {
      try {
        ({ devices, health } = await readGpus(session, deadlineMs));
      } catch (error) {
        readFailure = failureOf(error, deadlineMs);
      }
    }
    checks.push(...driverChecks({
      library,
      openFailure,
      libraryFile: libraryFileOf(library, options.libraryPath, env),
      kernelModule: readKernelModule(options.kernelModuleVersionPath ?? KERNEL_MODULE_VERSION_PATH),
      computeCapabilities: devices.map((d) => ({ index: d.index, capability: d.computeCapability })),
    }));
    // NVML hung (while opening, or reading): the GPUs it would have listed are not responding either.
    const hung = readFailure?.notResponding ?? openFailure?.notResponding;
    if (hung !== undefined) {
      checks.push({ id: 'gpu.snapshot', subject: 'GPUs', status: 'fail', summary: `reading the GPUs: not responding (${hung})`,
        evidence: { ...(readFailure ?? openFailure) }, advice: 'an NVML call hung in the driver: the kernel log checks below and the Xid errors in it say why; nvidia-smi will hang too; a GPU reset or a reboot clears it' });
    } else if (readFailure !== null) {
      checks.push({ id: 'gpu.snapshot', subject: 'GPUs', status: 'fail', summary: `reading the GPUs failed: ${readFailure.code}`,
        evidence: { ...readFailure }, advice: 'an NVML call failed or hung: check the kernel log for Xid errors and whether nvidia-smi answers' });
    }
    devices.forEach((device, i) => checks.push(...gpuChecks(device, health[i] ?? { kind: 'skipped' }, devices.length)));
    checks.push(...kernelLogChecks(await readKernelLog(options.kernelLogPath), devices));
    checks.push(...await hostChecks({ devDir: options.devDir ?? '/dev', procRoot: options.procRoot ?? '/proc', env, devices }));
    if (options.unitChecks !== undefined) checks.push(...await options.unitChecks(devices));
    return { status: worstStatus(checks), checks, library, gpuCount: devices.length, takenAt };
  } finally {
    if (session !== null && options.session === undefined) await session.close().catch(() => undefined);
  }
}
