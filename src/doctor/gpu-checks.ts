/**
 * The per-GPU checks of `gpugate doctor`, from one full snapshot and the GPU's health readings:
 * reachable, the driver's recovery action, persistence mode (off on a multi-GPU host: every attach pays the driver's
 * initialisation), compute mode, MIG mode pending a reset, remapped rows, volatile uncorrected
 * ECC errors, retired pages pending, clock event reasons that mean hardware trouble, the PCIe
 * link below its maximum, and fabric registration. A query the GPU does not support passes.
 */
import type { ClockEventReason, FieldError, GpuDevice, GpuHealth } from '../types';
import { recoveryRemedy } from '../nvml/recovery-action';
import type { DoctorCheck, DoctorStatus } from './doctor-check';
import type { NvmlOpenFailure } from './driver-checks';

/** One GPU's health reading, or how reading it failed (a hung call poisons the session: later GPUs fail the same way), or none for a GPU that does not answer. */
export type HealthOutcome = { kind: 'ok'; health: GpuHealth } | { kind: 'failed'; failure: NvmlOpenFailure } | { kind: 'skipped' };

/** Codes that mean "this GPU or driver has no such thing": nothing to judge. */
const ABSENT_CODES = new Set(['NVML_ERROR_NOT_SUPPORTED', 'NVML_ERROR_FUNCTION_NOT_FOUND']);
/** Codes that mean the GPU itself is gone or needs a reset, whichever query met them. */
const GPU_UNUSABLE_CODES = new Set(['NVML_ERROR_GPU_IS_LOST', 'NVML_ERROR_RESET_REQUIRED', 'NVML_ERROR_GPU_NOT_FOUND']);

/** Clock event reasons that signal hardware trouble, and what each means. */
const TROUBLE_REASONS: ReadonlyArray<readonly [ClockEventReason, string]> = [
  ['hw_slowdown', 'hardware slowdown (overheating or the power supply asserted slowdown)'],
  ['hw_thermal_slowdown', 'hardware thermal slowdown (the GPU or its memory is too hot)'],
  ['hw_power_brake_slowdown', 'hardware power brake (an external power brake signal, e.g. from the power supply)'],
  ['sw_thermal_slowdown', 'software thermal slowdown (the driver holds the clocks down to cool the GPU)'],
];

/** The subject line of a GPU: 'GPU 3 (GPU-…)'. */
export function gpuSubject(device: Pick<GpuDevice, 'index' | 'uuid'>): string {
  return `GPU ${device.index} (${device.uuid ?? 'no UUID'})`;
}

interface Context {
  subject: string;
  device: GpuDevice;
  health: GpuHealth | null;
  gpuCount: number;
}

function check(context: Context, id: string, status: DoctorStatus, summary: string, evidence: Record<string, unknown>, advice?: string): DoctorCheck {
  return { id: `gpu.${id}`, subject: context.subject, status, summary, evidence, ...(advice !== undefined ? { advice } : {}) };
}

/** A check whose reading failed: absent (not supported) passes, any other failure warns. */
function unread(context: Context, id: string, what: string, error: FieldError | undefined): DoctorCheck {
  if (error === undefined) return check(context, id, 'warn', `${what}: NVML gave neither a value nor an error`, {}, 'read it with nvidia-smi -q to compare');
  if (ABSENT_CODES.has(error.code)) {
    return check(context, id, 'pass', `${what}: not supported by this GPU or driver`, { code: error.code, fn: error.fn });
  }
  if (GPU_UNUSABLE_CODES.has(error.code)) {
    return check(context, id, 'fail', `${what} could not be read: ${error.code}`, { code: error.code, fn: error.fn, message: error.message },
      'the GPU is lost or needs a reset: reset it (nvidia-smi -r -i INDEX) or reboot; look for Xid 79 in the kernel log');
  }
  return check(context, id, 'warn', `${what} could not be read: ${error.code}`, { code: error.code, fn: error.fn, message: error.message },
    'NVML could not answer this query; see the other checks of this GPU and the kernel log');
}

function reachable(context: Context): DoctorCheck {
  const error = context.device.error;
  if (error === null) return check(context, 'reachable', 'pass', `${context.device.name} answers NVML`, { name: context.device.name, pciBusId: context.device.pciBusId });
  return check(context, 'reachable', 'fail', `the GPU does not answer: ${error.code}`, { code: error.code, fn: error.fn, message: error.message },
    error.code === 'NVML_ERROR_GPU_IS_LOST'
      ? 'the GPU has fallen off the bus (look for Xid 79 in the kernel log): reset it or reboot the host'
      : 'reset the GPU (nvidia-smi -r -i INDEX) or reboot the host');
}

/** The driver's recovery action (field 230, read when the session opened): any action fails; DCGM reports such a GPU healthy. */
function recoveryAction(context: Context): DoctorCheck {
  const action = context.device.recoveryAction;
  if (action === null) return unread(context, 'recovery-action', 'the recovery action', context.device.fieldErrors['recoveryAction']);
  if (action === 'none') return check(context, 'recovery-action', 'pass', 'the driver names no recovery action', { recoveryAction: action });
  return check(context, 'recovery-action', 'fail', `the driver says the GPU needs recovery action ${action} (Xid 154): it will not free up by waiting`,
    { recoveryAction: action }, recoveryRemedy(action, context.device.index));
}

function persistence(context: Context): DoctorCheck {
  const mode = context.device.persistenceMode;
  if (mode === null) return unread(context, 'persistence-mode', 'persistence mode', context.device.fieldErrors['persistenceMode']);
  if (mode) return check(context, 'persistence-mode', 'pass', 'persistence mode is on', { persistenceMode: true });
  const evidence = { persistenceMode: false, gpuCount: context.gpuCount };
  if (context.gpuCount <= 1) return check(context, 'persistence-mode', 'pass', 'persistence mode is off (a single GPU: the first attach pays the driver start once)', evidence);
  return check(context, 'persistence-mode', 'warn',
    `persistence mode is off on this ${context.gpuCount}-GPU host: the driver tears the GPU down after its last user, so every attach costs seconds`,
    evidence, 'run nvidia-persistenced (systemctl enable --now nvidia-persistenced), or nvidia-smi -pm 1');
}

function computeMode(context: Context): DoctorCheck {
  const mode = context.device.computeMode;
  if (mode === null) return unread(context, 'compute-mode', 'compute mode', context.device.fieldErrors['computeMode']);
  const evidence = { computeMode: mode };
  if (mode === 'default') return check(context, 'compute-mode', 'pass', 'compute mode is default (shared)', evidence);
  if (mode === 'prohibited') {
    return check(context, 'compute-mode', 'fail', 'compute mode is prohibited: no process can create a CUDA context on this GPU', evidence,
      'nvidia-smi -i INDEX -c DEFAULT (or EXCLUSIVE_PROCESS), unless this GPU is meant to be unusable');
  }
  return check(context, 'compute-mode', 'warn', `compute mode is ${mode}: one process at a time, so any leftover holder makes the next start fail`, evidence,
    'keep it only if the service is one process per GPU; gate with --no-processes so the start waits for the previous holder');
}

function migMode(context: Context): DoctorCheck {
  const health = context.health;
  if (health === null || health.migMode === null) return unread(context, 'mig-mode', 'MIG mode', health?.fieldErrors['migMode']);
  const { current, pending } = health.migMode;
  const evidence = { current, pending };
  const word = (on: boolean): string => (on ? 'on' : 'off');
  if (current !== pending) {
    return check(context, 'mig-mode', 'warn', `MIG mode is ${word(current)} but ${word(pending)} is pending: the change takes effect only at the next GPU reset`, evidence,
      'drain the GPU and reset it (nvidia-smi -r -i INDEX) or reboot; until then it keeps running with MIG ' + word(current));
  }
  return check(context, 'mig-mode', 'pass', `MIG mode is ${word(current)}, nothing pending`, evidence);
}

function remappedRows(context: Context): DoctorCheck {
  const rows = context.health?.remappedRows ?? null;
  if (rows === null) return unread(context, 'remapped-rows', 'row remapping', context.health?.fieldErrors['remappedRows']);
  const evidence = { ...rows };
  if (rows.failureOccurred) {
    return check(context, 'remapped-rows', 'fail', `row remapping failed (${rows.uncorrectable} uncorrectable, ${rows.correctable} correctable rows remapped)`, evidence,
      'the GPU has run out of spare memory rows: drain it; it needs replacing (RMA)');
  }
  if (rows.pending) {
    return check(context, 'remapped-rows', 'warn', 'a row remapping is pending: it takes effect at the next GPU reset', evidence,
      'drain the GPU and reset it (nvidia-smi -r -i INDEX) so the bad row is no longer used');
  }
  return check(context, 'remapped-rows', 'pass', `no remapping pending or failed (${rows.uncorrectable} uncorrectable, ${rows.correctable} correctable rows remapped)`, evidence);
}

function ecc(context: Context): DoctorCheck {
  const count = context.health?.volatileUncorrectedEccErrors ?? null;
  if (count === null) return unread(context, 'ecc-errors', 'volatile ECC errors', context.health?.fieldErrors['volatileUncorrectedEccErrors']);
  if (count > 0) {
    return check(context, 'ecc-errors', 'fail', `${count} uncorrectable ECC error(s) since the driver loaded`, { volatileUncorrected: count },
      'drain the GPU and reset it; if errors return, check remapped rows and replace the GPU');
  }
  return check(context, 'ecc-errors', 'pass', 'no uncorrectable ECC errors since the driver loaded', { volatileUncorrected: 0 });
}

function retiredPages(context: Context): DoctorCheck {
  const pending = context.health?.retiredPagesPending ?? null;
  if (pending === null) return unread(context, 'retired-pages', 'page retirement', context.health?.fieldErrors['retiredPagesPending']);
  if (pending) {
    return check(context, 'retired-pages', 'warn', 'retired pages are pending: they leave use at the next GPU reset', { pending },
      'drain the GPU and reset it (nvidia-smi -r -i INDEX) or reboot');
  }
  return check(context, 'retired-pages', 'pass', 'no page retirement pending', { pending });
}

function clockEvents(context: Context): DoctorCheck {
  const reasons = context.health?.clockEventReasons ?? null;
  if (reasons === null) return unread(context, 'clock-events', 'clock event reasons', context.health?.fieldErrors['clockEventReasons']);
  const evidence = { reasons, bits: context.health?.clockEventReasonBits ?? null };
  const trouble = TROUBLE_REASONS.filter(([reason]) => reasons.includes(reason));
  if (trouble.length > 0) {
    return check(context, 'clock-events', 'warn', `clocks held down by ${trouble.map(([, text]) => text).join('; ')}`, evidence,
      'check cooling (fans, airflow, inlet temperature) and the power supply; repeated hardware slowdowns call for the vendor\'s diagnostics');
  }
  return check(context, 'clock-events', 'pass', reasons.length === 0 ? 'no clock event reason active' : `clock event reasons: ${reasons.join(', ')} (none signals trouble)`, evidence);
}

function pcieLink(context: Context): DoctorCheck {
  const health = context.health;
  const { generation = null, maxGeneration = null, width = null, maxWidth = null } = health?.pcie ?? {};
  if (generation === null || maxGeneration === null || width === null || maxWidth === null) {
    const error = health?.fieldErrors['pcie.width'] ?? health?.fieldErrors['pcie.maxWidth'] ?? health?.fieldErrors['pcie.generation'] ?? health?.fieldErrors['pcie.maxGeneration'];
    return unread(context, 'pcie-link', 'PCIe link', error);
  }
  const evidence = { generation, maxGeneration, width, maxWidth };
  const idle = health?.clockEventReasons?.includes('gpu_idle') === true;
  if (width < maxWidth) {
    return check(context, 'pcie-link', 'warn', `PCIe link trained at x${width} of x${maxWidth}: host transfers run at a fraction of their speed`, evidence,
      'reseat the GPU, check the riser or cable and the slot (lspci -vv shows LnkSta against LnkCap)');
  }
  if (generation < maxGeneration) {
    if (idle) return check(context, 'pcie-link', 'pass', `PCIe gen ${generation} of ${maxGeneration} x${width} while idle (links slow down to save power)`, { ...evidence, idle });
    return check(context, 'pcie-link', 'warn', `PCIe link at gen ${generation} of ${maxGeneration} while busy`, { ...evidence, idle },
      'check the slot\'s and BIOS\'s PCIe generation setting, the riser, and the kernel log for AER errors');
  }
  return check(context, 'pcie-link', 'pass', `PCIe gen ${generation} x${width}, its maximum`, evidence);
}

function fabric(context: Context): DoctorCheck {
  const info = context.health?.fabric ?? null;
  if (info === null) {
    const error = context.health?.fieldErrors['fabric'];
    if (error !== undefined && ABSENT_CODES.has(error.code)) return check(context, 'fabric', 'pass', 'no GPU fabric (not NVSwitch-attached)', { code: error.code });
    return unread(context, 'fabric', 'GPU fabric state', error);
  }
  const evidence = { ...info };
  if (info.state === 'not_supported') return check(context, 'fabric', 'pass', 'no GPU fabric (not NVSwitch-attached)', evidence);
  if (info.state !== 'completed') {
    return check(context, 'fabric', 'warn', `fabric registration is ${info.state.replace('_', ' ')}: CUDA cannot use the GPU until it completes`, evidence,
      'check that nvidia-fabricmanager is running (systemctl status nvidia-fabricmanager) and its log');
  }
  if (info.status !== 'NVML_SUCCESS') {
    return check(context, 'fabric', 'fail', `fabric registration failed: ${info.status}`, evidence,
      'see the nvidia-fabricmanager log; restart it, and reset the GPUs and NVSwitches if it persists');
  }
  return check(context, 'fabric', 'pass', `registered with the fabric (clique ${info.cliqueId})`, evidence);
}

function healthFailed(context: Context, failure: NvmlOpenFailure): DoctorCheck {
  const summary = failure.notResponding !== undefined
    ? `the health readings: not responding (${failure.notResponding})`
    : `the health readings failed: ${failure.code}${failure.fn === null ? '' : ` (${failure.fn})`}`;
  return check(context, 'health', 'fail', summary, { ...failure },
    // A session closed under doctor was closed by a hung call on an earlier GPU.
    failure.code === 'GPUGATE_TIMEOUT' || failure.code === 'GPUGATE_SESSION_CLOSED'
      ? 'an NVML call hung in the driver: check the kernel log for Xid errors and whether nvidia-smi -q also hangs; a reset or reboot clears it'
      : 'NVML failed while reading this GPU; see the kernel log');
}

/** Every check of one GPU, from its snapshot entry and its health reading. */
export function gpuChecks(device: GpuDevice, outcome: HealthOutcome, gpuCount: number): DoctorCheck[] {
  const health = outcome.kind === 'ok' ? outcome.health : null;
  const context: Context = { subject: gpuSubject(device), device, health, gpuCount };
  const first = reachable(context);
  if (device.error !== null) return [first];
  const fromSnapshot = [first, recoveryAction(context), persistence(context), computeMode(context)];
  if (outcome.kind !== 'ok') {
    return outcome.kind === 'failed' ? [...fromSnapshot, healthFailed(context, outcome.failure)] : fromSnapshot;
  }
  return [...fromSnapshot, migMode(context), remappedRows(context), ecc(context), retiredPages(context), clockEvents(context), pcieLink(context), fabric(context)];
}
