/**
 * A driver already stuck: before a gate (or `status`, or `doctor`) opens NVML, it looks for an
 * earlier NVML helper asleep in the kernel. Such a helper holds the driver's shared lock (a GSP
 * RPC timeout or a GPU off the bus stalls every call, on every GPU), so a new session would only
 * pile another stuck process on top; the gate refuses at once instead, naming the stuck call.
 */
import { findStuckNvmlHelpers, type StuckNvmlHelper } from '../host/stuck-nvml-helper';
import { nvmlHelperPath } from '../nvml/helper-path';
import { GPUGATE_DRIVER_STUCK, NvmlError } from '../nvml/nvml-error';

/** How to look for a stuck helper. */
export interface StuckDriverOptions {
  /** The helper executable; default the one beside the addon (nvmlHelperPath()). */
  helperPath?: string | null;
  /** Default /proc. */
  procRoot?: string;
  /** A call in state D counts as stuck once it is older than this: the caller's own NVML deadline. */
  stuckAfterMs: number;
  /** Now, CLOCK_REALTIME milliseconds; default Date.now(). */
  nowMs?: number;
}

/** The stuck helper a new session would queue behind, and how many more there are. */
export interface StuckDriver {
  helper: StuckNvmlHelper;
  /** Further stuck helpers found (each an earlier gate's). */
  others: number;
  /** How long the helper's call has run at the scan, ms; null when its command line did not say. */
  stuckForMs: number | null;
}

/** An NVML session refused because the driver is already stuck: an NvmlError (exit 69) with the helper found. */
export class DriverStuckError extends NvmlError {
  /** The stuck helper: pid, start time, wchan, its call. */
  readonly helper: StuckNvmlHelper;
  readonly stuckForMs: number | null;

  constructor(stuck: StuckDriver) {
    const call = stuck.helper.state.kind === 'in' ? stuck.helper.state.call : null;
    super({ code: GPUGATE_DRIVER_STUCK, nvmlReturn: null, fn: call?.fn ?? null, device: call?.gpu ?? null, helperPid: stuck.helper.pid, message: driverStuckText(stuck) });
    this.helper = stuck.helper;
    this.stuckForMs = stuck.stuckForMs;
  }
}

/**
 * A helper counts when it is ours to believe (it runs as root or as this process's user: another
 * user could park a copy of the helper in state D to block every root gate) and is really stuck:
 * its call began at least `stuckAfterMs` ago (a sample in state D alone is also every short
 * ioctl), or its session already killed it and it cannot die.
 */
function counts(helper: StuckNvmlHelper, nowMs: number, stuckAfterMs: number, ownUid: number | null): boolean {
  if (helper.uid === null || (helper.uid !== 0 && helper.uid !== ownUid)) return false;
  if (helper.killPending) return true;
  return helper.state.kind === 'in' && nowMs - helper.state.call.sinceUnixMs >= stuckAfterMs;
}

/** The longest-stuck helper that counts, or null. */
export async function findStuckDriver(options: StuckDriverOptions): Promise<StuckDriver | null> {
  const helperPath = options.helperPath === undefined ? nvmlHelperPath() : options.helperPath;
  if (helperPath === null) return null;
  const nowMs = options.nowMs ?? Date.now();
  const scan = await findStuckNvmlHelpers(helperPath, options.procRoot);
  const ownUid = process.geteuid?.() ?? null;
  const stuck = scan.stuck.filter((helper) => counts(helper, nowMs, options.stuckAfterMs, ownUid));
  const since = (helper: StuckNvmlHelper): number => (helper.state.kind === 'in' ? helper.state.call.sinceUnixMs : Number.POSITIVE_INFINITY);
  stuck.sort((a, b) => since(a) - since(b) || a.pid - b.pid);
  const helper = stuck[0];
  if (helper === undefined) return null;
  return { helper, others: stuck.length - 1, stuckForMs: helper.state.kind === 'in' ? Math.max(0, nowMs - helper.state.call.sinceUnixMs) : null };
}

/** Seconds as a person reads them: whole from 10 s up, else to a tenth ("0.5"). */
export function secondsText(ms: number): string {
  return ms >= 10_000 ? String(Math.round(ms / 1000)) : String(Math.round(ms / 100) / 10);
}

/** "stuck in the kernel for 734 s in nvmlDeviceGetMemoryInfo_v2 on GPU 3": what doctor and the gate say. */
export function stuckCallText(stuck: StuckDriver): string {
  const state = stuck.helper.state;
  if (state.kind !== 'in' || stuck.stuckForMs === null) return 'stuck in the kernel (its call is not known: the helper was killed and has not exited)';
  const gpu = state.call.gpu === null ? '' : ` on GPU ${state.call.gpu}`;
  return `stuck in the kernel for ${secondsText(stuck.stuckForMs)} s in ${state.call.fn}${gpu}`;
}

/** The message of a {@link DriverStuckError}. */
function driverStuckText(stuck: StuckDriver): string {
  const { helper } = stuck;
  const state = helper.state;
  const when = state.kind === 'in' && stuck.stuckForMs !== null
    ? `since ${new Date(state.call.sinceUnixMs).toISOString()} (${secondsText(stuck.stuckForMs)} s) in ${state.call.fn}${state.call.gpu === null ? '' : ` on GPU ${state.call.gpu}`}`
    : 'in an unknown call (its session killed it; it cannot exit until the kernel call returns)';
  const facts = [`helper pid ${helper.pid}`, 'state D', `wchan ${helper.wchan ?? 'unknown'}`, ...(helper.killPending ? ['SIGKILL pending'] : [])];
  const more = stuck.others > 0 ? `; ${stuck.others} more stuck helper${stuck.others === 1 ? '' : 's'}` : '';
  return `gpugate: the NVIDIA driver has been stuck in the kernel ${when} (${facts.join(', ')}${more}); ` +
    'every NVML call would hang behind it, on every GPU, so NVML was not opened: run `gpugate doctor`, check the kernel log for Xid errors; a GPU reset or a reboot clears it';
}

/** Rejects with a {@link DriverStuckError} when an earlier helper is stuck; resolves otherwise. */
export async function refuseIfDriverStuck(options: StuckDriverOptions): Promise<void> {
  const stuck = await findStuckDriver(options);
  if (stuck !== null) throw new DriverStuckError(stuck);
}
