/**
 * gate(): what `gpugate wait` and `gpugate check` do, for Node programs. Checks its options
 * (option-check.ts), opens NVML (or uses the caller's session: shared-session.ts), prepares the
 * wait once (wait-state.ts), takes one read that is both the stale scan's snapshot and the first
 * poll, runs the requested actions (stop leftovers, remove leaked /dev/shm files), then polls (a
 * wait: poll-loop.ts) or judges that one read (a check). It resolves with a {@link GateOutcome} in
 * every case but a malformed option (an unknown key, a value of the wrong type): a busy GPU, a
 * timeout, a lost GPU or an interrupt are outcomes. waitForGpusFree and checkGpusOnce (wait.ts)
 * are gate() without the stale scan.
 */
import { monotonicMs } from '../monotonic-clock';
import { ConfigError } from '../config-error';
import { isOsError } from '../host/os-error';
import { readProcess } from '../host/procfs';
import { NvmlError } from '../nvml/nvml-error';
import { withCallBackstop } from '../nvml/call-backstop';
import { refuseIfDriverStuck } from './stuck-driver';
import type { Snapshot } from '../types';
import { formatBytes, formatDuration } from '../units';
import { DeviceSelectionError } from './device-selection-error';
import { resolveCriteria } from './criteria';
import type { Evaluation, WaitState } from './evaluation';
import { describeFailures } from './failure-text';
import { gateDefaults } from './gate-defaults';
import type { GateEvent, GateOptions, WaitOptions } from './gate-options';
import type { GateOutcome, GateResult } from './gate-outcome';
import { checkDurationLimits, checkGateOptions } from './option-check';
import { pollUntilFree } from './poll-loop';
import { confirmingPlan, evaluateFirstRead, readOnce } from './read-plan';
import { acquireSession } from './shared-session';
import { isStaleHolder } from './stale-holders';
import { inspectHolders } from './stale';
import { GpuWaitAbortError } from './wait-abort-error';
import { prepareWait } from './wait-state';
import { GpuWaitTimeoutError } from './wait-timeout-error';

export type { GateEvent, GateOptions, StalePolicy } from './gate-options';

/** A gate's verdict reached inside the pipeline (not by an error). */
class Verdict {
  constructor(
    readonly result: GateResult,
    readonly reason: string,
  ) {}
}

/** The result an error that ended a gate stands for, by its class. */
function resultForError(error: unknown): GateResult {
  if (error instanceof GpuWaitTimeoutError) return 'timeout';
  if (error instanceof GpuWaitAbortError) return 'interrupted';
  if (error instanceof NvmlError) return 'unavailable';
  if (error instanceof ConfigError || error instanceof DeviceSelectionError) return 'config-error';
  if (isOsError(error)) return 'os-error';
  return 'internal-error';
}

/** What aborted the gate, for the reason text: the signal's name when the abort reason carries one. */
function abortedBy(signal: AbortSignal | undefined): string {
  const reason: unknown = signal?.reason;
  if (typeof reason === 'object' && reason !== null && typeof (reason as { signal?: unknown }).signal === 'string') return (reason as { signal: string }).signal;
  return 'an abort';
}

/** The GPUs that passed (every selected one in a ready verdict without `accept`). */
function indicesOf(evaluation: Evaluation): string {
  return evaluation.devices.filter((gpu) => gpu.ok).map((gpu) => gpu.index).join(',') || '(none selected)';
}

/**
 * Runs one gate with the semantics of `gpugate wait` (default) or `gpugate check` and resolves
 * with its outcome. Rejects only for a malformed option (before NVML is opened): a ConfigError
 * naming an option of the wrong type or an unknown key (with the nearest known one), a UsageError
 * for minFree text that does not parse.
 */
export async function gate(options: GateOptions = {}): Promise<GateOutcome> {
  const startMs = monotonicMs();
  checkGateOptions(options);
  const mode = options.mode ?? 'wait';
  const stalePolicy = options.stale ?? 'report';
  const cleanGlobs = options.cleanShm ?? [];
  const killStale = options.killStale ?? false;
  const emit = options.onEvent ?? ((): void => {});
  const callTimeoutMs = options.callTimeoutMs ?? gateDefaults.callTimeoutMs;
  const outcome: GateOutcome = {
    result: 'internal-error',
    reason: '',
    elapsedMs: 0,
    polls: 0,
    evaluation: null,
    stale: { holders: [], shm: null, report: null },
    actions: { signals: [], shm: [] },
    error: null,
    library: null,
    selection: null,
  };
  const waitOptions: WaitOptions = {
    ...options,
    ...(mode === 'wait' ? { stableMs: options.stableMs ?? gateDefaults.stableMs } : {}),
    inspectHolders: options.inspectHolders ?? stalePolicy !== 'ignore',
  };
  let release: (() => Promise<void>) | null = null;
  let state: WaitState | null = null;
  // An interruption is reported at the moment it came, not when the gate got round to stopping
  // (a read in flight, an NVML call stuck in the driver).
  let abortedAtMs: number | null = options.signal?.aborted === true ? startMs : null;
  const noteAbort = (): void => {
    abortedAtMs ??= monotonicMs();
  };
  options.signal?.addEventListener('abort', noteAbort, { once: true });
  const abortedAfter = (): string => formatDuration((abortedAtMs ?? monotonicMs()) - startMs);
  try {
    // Options that can never work are a config-error before NVML is opened.
    checkDurationLimits(options);
    resolveCriteria(waitOptions);
    // A session of our own would queue behind a helper already stuck in the driver: refuse at once.
    if (options.session === undefined) await refuseIfDriverStuck({ stuckAfterMs: callTimeoutMs });
    const acquired = await withCallBackstop(acquireSession(options), callTimeoutMs, 'opening NVML', 'callTimeoutMs');
    release = acquired.release;
    const session = acquired.session;
    const library = session.library;
    outcome.library = library;
    emit({ kind: 'library', library });
    state = await prepareWait(waitOptions, session, startMs);
    outcome.selection = state.selection;
    emit({ kind: 'selection', selection: state.selection });
    if (state.units.length === 0) {
      outcome.evaluation = { elapsedMs: monotonicMs() - startMs, polls: 0, ok: true, devices: [], snapshot: { takenAt: Date.now(), devices: [] }, selection: state.selection };
      throw new Verdict('ready', 'GPUs (none selected) free');
    }
    const readFirst = (prepared: WaitState): Promise<{ snapshot: Snapshot; receivedAtMs: number }> =>
      withCallBackstop(readOnce(session, prepared, confirmingPlan(prepared)), callTimeoutMs, 'reading the GPUs', 'callTimeoutMs');
    let first: { snapshot: Snapshot; receivedAtMs: number } | undefined;
    // The scan (every process's fds and maps, /dev/shm) costs a few hundred ms: worth it once
    // before a wait; for a one-sample check only when an action or stale 'fail' needs it.
    const required = stalePolicy === 'fail' || killStale || cleanGlobs.length > 0;
    if (stalePolicy !== 'ignore' && (mode === 'wait' || required)) {
      // One read is both the stale scan's snapshot and the first poll. (Without a scan, a wait's
      // first poll is the session's shared one, which every concurrent waiter takes together.)
      first = await readFirst(state);
      let acted = false;
      try {
        acted = await staleScan(first.snapshot, state, options, outcome, emit);
      } catch (error) {
        if (error instanceof Verdict || required || !isOsError(error)) throw error;
        emit({ kind: 'stale-scan-skipped', error: error as Error });
      }
      // What the actions changed is for the first poll to see.
      if (acted) first = undefined;
    }
    if (options.signal?.aborted) throw new GpuWaitAbortError(state.last, options.signal.reason);
    if (mode === 'check') {
      const evaluation = await evaluateFirstRead(first ?? (await readFirst(state)), state, false);
      outcome.evaluation = evaluation;
      const accepted = options.accept === undefined ? evaluation.ok : await options.accept(evaluation);
      if (accepted) throw new Verdict('ready', `GPUs ${indicesOf(evaluation)} free`);
      throw new Verdict('busy', `GPUs not free: ${describeFailures(evaluation.devices) || 'every GPU free, but not accepted'}`);
    }
    const result = await pollUntilFree(session, state, {
      intervalMs: options.intervalMs ?? gateDefaults.intervalMs,
      timeoutMs: options.timeoutMs ?? gateDefaults.timeoutMs,
      ...(options.signal !== undefined ? { signal: options.signal } : {}),
      ...(options.onPoll !== undefined ? { onPoll: options.onPoll } : {}),
      ...(first !== undefined ? { first } : {}),
      ...(options.accept !== undefined ? { accept: options.accept } : {}),
    });
    outcome.evaluation = result.evaluation;
    outcome.result = 'ready';
    outcome.reason = `GPUs ${indicesOf(result.evaluation)} free and stable after ${formatDuration(result.elapsedMs)} (${result.polls} polls)`;
  } catch (error) {
    if (error instanceof Verdict) {
      outcome.result = error.result;
      outcome.reason = error.reason;
    } else {
      outcome.result = resultForError(error);
      outcome.evaluation = (error as { evaluation?: Evaluation | null }).evaluation ?? state?.last ?? outcome.evaluation;
      const message = error instanceof Error ? error.message : String(error);
      if (outcome.result === 'interrupted') {
        outcome.reason = `interrupted by ${abortedBy(options.signal)} after ${abortedAfter()}${outcome.evaluation === null ? '' : `: ${describeFailures(outcome.evaluation.devices) || 'GPUs free, not yet stable'}`}`;
      } else if (outcome.result === 'timeout') {
        outcome.reason = message;
      } else {
        outcome.error = error instanceof Error ? error : new Error(message);
        outcome.reason = outcome.result === 'internal-error' ? `internal error (a bug in gpugate, please report it): ${error instanceof Error && error.stack !== undefined ? error.stack : message}` : message;
      }
    }
  }
  if (options.signal?.aborted === true && outcome.result !== 'ready' && outcome.result !== 'interrupted') {
    // The signal arrived during a step that cannot be aborted (opening NVML, the /proc scan).
    outcome.result = 'interrupted';
    outcome.error = null;
    outcome.reason = `interrupted by ${abortedBy(options.signal)} after ${abortedAfter()}`;
  }
  options.signal?.removeEventListener('abort', noteAbort);
  outcome.elapsedMs = monotonicMs() - startMs;
  outcome.polls = outcome.evaluation?.polls ?? 0;
  if (release !== null) await release().catch(() => undefined);
  return outcome;
}

/**
 * The stale scan on the first read: classify its holders, find leaked /dev/shm files, stop
 * leftovers and remove leaked files when asked, and fail with stale 'fail'. Resolves true when
 * an action changed something (a signal sent, a file removed).
 */
async function staleScan(snapshot: Snapshot, state: WaitState, options: GateOptions, outcome: GateOutcome, emit: (event: GateEvent) => void): Promise<boolean> {
  const cleanGlobs = options.cleanShm ?? [];
  const dryRun = options.dryRun ?? false;
  // Loaded here, not at start-up: a plain check runs no scan (`import()`, not
  // `require`: the tests load src/ as ES modules, where a relative `require` finds no .ts file).
  const { cleanShm, DEFAULT_SHM_PATTERNS } = await import('../host/shm.js');
  const report = await inspectHolders(snapshot, {
    scanShm: true, // leaked files are stale resources whatever the GPUs' memory says
    ...(typeof options.inspectHolders === 'object' ? options.inspectHolders : {}),
    devices: state.selection.indices,
    shmPatterns: [...DEFAULT_SHM_PATTERNS, ...cleanGlobs],
    ...(state.inspectContext !== null ? { context: await state.inspectContext() } : {}),
  });
  const stale = report.holders.filter(isStaleHolder);
  outcome.stale = { holders: stale, shm: report.shm, report };
  emit({ kind: 'stale-scan', stale, report });
  let acted = false;
  if (options.killStale === true) {
    const graceMs = options.killGraceMs ?? gateDefaults.killGraceMs;
    if (report.unitCgroup === null) {
      const self = await readProcess(process.pid);
      emit({ kind: 'kill-stale-no-unit', cgroup: self.kind === 'ok' ? self.cgroup ?? '(unreadable)' : '(unreadable)' });
    }
    const leftovers = report.holders.filter((holder) => holder.class === 'leftover');
    if (leftovers.length > 0 && !dryRun) emit({ kind: 'kill-stale-starting', leftovers, graceMs });
    // Each action is recorded the moment it happens, so an interrupted grace still reports every signal already sent.
    const signals = outcome.actions.signals;
    const { reapStale } = await import('./reap.js');
    const actions = await reapStale(report, {
      dryRun,
      graceMs,
      ...(options.signal !== undefined ? { signal: options.signal } : {}),
      onAction: (action) => {
        if (!signals.includes(action)) signals.push(action);
        emit({ kind: 'kill-stale', action });
      },
    });
    acted = actions.some((action) => action.sent.length > 0);
    const refused = actions.filter((action) => action.result === 'no-permission');
    if (refused.length > 0) {
      throw new Verdict('no-permission', `--kill-stale: no permission to signal ${refused.map((action) => action.pid).join(', ')} (run as the service's user or root)`);
    }
  }
  if (cleanGlobs.length > 0) {
    const results = await cleanShm(cleanGlobs, { dryRun });
    outcome.actions.shm = results;
    for (const result of results) emit({ kind: 'clean-shm', result });
    acted ||= results.some((result) => result.result === 'removed');
    const refused = results.filter((result) => result.result === 'no-permission');
    if (refused.length > 0) throw new Verdict('no-permission', `--clean-shm: no permission to remove ${refused.map((result) => result.path).join(', ')}`);
  }
  if (options.stale === 'fail') {
    const holders = options.killStale === true ? [] : stale;
    const leaked = cleanGlobs.length > 0 ? [] : report.shm.leaked;
    if (holders.length > 0 || leaked.length > 0) {
      const what = [
        ...holders.map((holder) => `pid ${holder.pid} (${holder.class}: ${holder.reason})`),
        ...leaked.map((entry) => `${entry.path} (${formatBytes(entry.allocatedBytes)})`),
      ];
      throw new Verdict('stale', `--stale fail: stale resources found: ${what.join('; ')}`);
    }
  }
  return acted;
}
