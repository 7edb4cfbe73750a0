/**
 * The body shared by `gpugate wait` and `gpugate check`: open NVML, scan for stale resources
 * (and act on them when asked), evaluate the GPUs (poll until free and stable, or take one
 * sample), then report the outcome once, in every form asked for (log, --json, --report-file,
 * --notify), and pick the exit code. `wait -- CMD` then runs CMD.
 */

import { performance } from 'node:perf_hooks';
import type { NvmlSession } from '../types';
import { formatBytes, formatDuration } from '../units';
import { CliError } from './cli-error';
import type { CommandContext } from './command-context';
import type { CriteriaSettings, WaitSettings } from './criteria-settings';
import { ExitCode, exitCodeForError, exitCodeName } from './exit-codes';
import { describeFailures } from './failure-text';
import { STALE_CLASSES, holderLabel, type GpuEvaluationView, type HolderView, type StaleView } from './gpu-view';
import { exitCodeForSignal, InterruptWatch } from './interrupt-watch';
import { errorJson, gpuJson, staleJson, type ResultJson } from './json-result';
import { logfmt } from './logfmt';
import { closeSession, openSession, withBackstop } from './nvml-session';
import { gpuLine } from './progress-line';
import { ProgressReporter, type PollView } from './progress-reporter';
import { writeReportFile } from './report-file';
import { runWrapped } from './run-wrapped';
import { readSelectedSnapshot } from './selected-snapshot';
import { createStatusNotifier, type StatusPublisher } from './status-notifier';
import { jsonDocument } from './json-document';

/** An evaluation as the wait API returns it (the parts used here). */
interface EvaluationLike extends PollView {
  devices: GpuEvaluationView[];
  selection?: { source: string; warnings: string[] };
}

/** Everything the final report is made of. */
interface Outcome {
  result: string;
  exitCode: number;
  reason: string;
  evaluation: EvaluationLike | null;
  error: unknown;
  prepassHolders: HolderView[];
  shm: StaleView['shm'];
  actions: { signals: unknown[]; shm: unknown[] };
  library: ResultJson['library'];
  selection: ResultJson['selection'];
}

/** Run `wait` (settings with timing) or `check` (one sample). Resolves to the exit code. */
export async function runGate(kind: 'wait' | 'check', context: CommandContext, settings: CriteriaSettings | WaitSettings): Promise<number> {
  const { logger, env } = context;
  const startMs = performance.now();
  const timing = 'timeoutMs' in settings ? settings : null;
  const publish: StatusPublisher | undefined = settings.notify ? createStatusNotifier(env, logger) : undefined;
  const reporter = new ProgressReporter({
    logger,
    ...(timing !== null ? { timeoutMs: timing.timeoutMs, stableMs: timing.stableMs } : {}),
    ...(publish !== undefined ? { onStatus: publish } : {}),
  });
  const outcome: Outcome = {
    result: 'internal-error',
    exitCode: ExitCode.software,
    reason: '',
    evaluation: null,
    error: null,
    prepassHolders: [],
    shm: null,
    actions: { signals: [], shm: [] },
    library: null,
    selection: null,
  };
  let reported = false;
  const report = (): void => {
    if (reported) return;
    reported = true;
    finalReport(kind, context, settings, outcome, reporter, performance.now() - startMs, publish);
  };
  const watch = new InterruptWatch((signal) => {
    // The command did not finish by itself within a second of the signal (NVML stuck): report now.
    outcome.result = 'interrupted';
    outcome.exitCode = exitCodeForSignal(signal);
    outcome.evaluation = (reporter.last as EvaluationLike | null) ?? outcome.evaluation;
    outcome.reason = `interrupted by ${signal} after ${formatDuration(performance.now() - startMs)}`;
    report();
  });

  let session: NvmlSession | null = null;
  try {
    session = await openSession(settings.libraryPath, settings.callTimeoutMs);
    const library = session.library;
    outcome.library = {
      path: library.path,
      driverVersion: library.driverVersion,
      nvmlVersion: library.nvmlVersion,
      cudaDriverVersion: library.cudaDriverVersion,
    };
    logger.debug(`nvml ${logfmt([['library', library.path], ['driver', library.driverVersion], ['nvml', library.nvmlVersion]])}`);
    // The full scan (every process's fds and maps, /dev/shm) costs a few hundred ms: worth it
    // once before a wait; for a one-sample check only when an action or --stale fail needs it.
    const scan = settings.stale !== 'ignore' && (timing !== null || settings.stale === 'fail' || settings.killStale || settings.cleanShm.length > 0);
    if (scan) {
      const required = settings.stale === 'fail' || settings.killStale || settings.cleanShm.length > 0;
      try {
        await staleScan(session, context, settings, outcome, reporter, watch.signal, publish);
      } catch (error) {
        // Only reporting: a scan that cannot read /proc must not stop the wait itself.
        if (required || exitCodeForError(error) !== ExitCode.osError) throw error;
        logger.warning(`stale scan skipped: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    let warned = scan;
    const warnSelection = (evaluation: { selection?: { warnings: string[] } }): void => {
      if (warned) return;
      warned = true;
      for (const warning of evaluation.selection?.warnings ?? []) logger.warning(warning);
    };
    const { checkGpusOnce, waitForGpusFree } = require('../gate/wait') as typeof import('../gate/wait');
    const common = {
      session,
      ...(settings.gpus !== undefined ? { gpus: settings.gpus } : {}),
      ...(settings.minFree !== undefined ? { minFree: settings.minFree } : {}),
      ...(settings.marginBytes !== undefined ? { marginBytes: settings.marginBytes } : {}),
      ...(settings.maxUsed !== undefined ? { maxUsed: settings.maxUsed } : {}),
      noProcesses: settings.noProcesses,
      ignore: settings.ignore,
      allowEmptySelection: settings.allowEmpty,
      inspectHolders: settings.stale !== 'ignore',
      env,
    };
    if (timing !== null) {
      const result = await waitForGpusFree({
        ...common,
        stableMs: timing.stableMs,
        stableToleranceBytes: timing.stableToleranceBytes,
        timeoutMs: timing.timeoutMs,
        intervalMs: timing.intervalMs,
        signal: watch.signal,
        onPoll: (evaluation) => {
          warnSelection(evaluation);
          reporter.poll(evaluation);
        },
      });
      outcome.evaluation = result.evaluation;
      outcome.result = 'ready';
      outcome.exitCode = ExitCode.ok;
      outcome.reason = `GPUs ${indicesOf(result.evaluation)} free and stable after ${formatDuration(result.elapsedMs)} (${result.polls} polls)`;
    } else {
      const evaluation = await withBackstop(checkGpusOnce(common), settings.callTimeoutMs * 2, 'reading the GPUs');
      outcome.evaluation = evaluation;
      warnSelection(evaluation);
      reporter.reportStaleHolders(evaluation.devices.flatMap((gpu) => gpu.holders));
      if (evaluation.ok) {
        outcome.result = 'ready';
        outcome.exitCode = ExitCode.ok;
        outcome.reason = `GPUs ${indicesOf(evaluation)} free`;
      } else {
        outcome.result = 'busy';
        outcome.exitCode = ExitCode.tempFail;
        outcome.reason = `GPUs not free: ${describeFailures(evaluation.devices)}`;
      }
    }
  } catch (error) {
    recordError(error, outcome, watch, performance.now() - startMs, reporter);
  }
  if (watch.received !== null && outcome.result !== 'interrupted' && outcome.exitCode !== ExitCode.ok) {
    // A signal that arrived during a step that cannot be aborted (opening NVML, the /proc scan).
    outcome.result = 'interrupted';
    outcome.exitCode = watch.exitCode();
    outcome.reason = `interrupted by ${watch.received} after ${formatDuration(performance.now() - startMs)}`;
  }
  if (outcome.evaluation?.selection !== undefined) outcome.selection = outcome.evaluation.selection;
  report();
  await closeSession(session);
  if (outcome.exitCode !== ExitCode.ok || context.wrapped.length === 0) {
    watch.dispose();
    return outcome.exitCode;
  }
  logger.info(`running ${logfmt([['command', context.wrapped.join(' ')]])}`);
  // The wrapper's listeners are in place before the watch's go: no moment without a handler.
  const status = runWrapped(context.wrapped, logger, env);
  watch.dispose();
  return status;
}

function indicesOf(evaluation: EvaluationLike): string {
  return evaluation.devices.map((gpu) => gpu.index).join(',') || '(none selected)';
}

/** Find stale holders and leaked shm before evaluating; kill / clean when asked; fail when --stale fail. */
async function staleScan(
  session: NvmlSession,
  context: CommandContext,
  settings: CriteriaSettings,
  outcome: Outcome,
  reporter: ProgressReporter,
  interrupted: AbortSignal,
  publish: StatusPublisher | undefined,
): Promise<void> {
  const { logger } = context;
  const { snapshot, selection } = await readSelectedSnapshot(session, settings, context);
  outcome.selection = { source: selection.source, warnings: selection.warnings };
  const { inspectHolders } = require('../gate/stale') as typeof import('../gate/stale');
  const { DEFAULT_SHM_PATTERNS } = require('../host/shm') as typeof import('../host/shm');
  const report = await inspectHolders(snapshot, {
    devices: selection.indices,
    shmPatterns: [...DEFAULT_SHM_PATTERNS, ...settings.cleanShm],
  });
  outcome.shm = report.shm;
  const stale = report.holders.filter((holder) => STALE_CLASSES.has(holder.class));
  outcome.prepassHolders = stale;
  reporter.reportStaleHolders(stale);
  if (report.nestedPidNamespace) {
    logger.info('holders cannot be attributed: gpugate runs in a nested PID namespace (use hostPID / --pid=host to see them); waiting on memory alone');
  }
  for (const entry of report.shm.leaked) {
    logger.warning(`stale-shm ${logfmt([
      ['path', entry.path],
      ['size', formatBytes(entry.allocatedBytes)],
      ['tmpfs_free', report.shm.tmpfsFreeBytes === null ? null : formatBytes(report.shm.tmpfsFreeBytes)],
    ])}`);
  }
  if (settings.killStale) {
    const { reapStale } = require('../host/reap') as typeof import('../host/reap');
    if (report.unitCgroup === null) {
      const { readProcess } = require('../host/procfs') as typeof import('../host/procfs');
      const self = await readProcess(process.pid);
      const cgroup = self.kind === 'ok' ? self.cgroup ?? '(unreadable)' : '(unreadable)';
      logger.notice(`kill-stale ${logfmt([['result', 'skipped'], ['reason', `gpugate is not in a systemd service's cgroup (${cgroup}): no holder can be proven a leftover of this service, nothing is signalled`]])}`);
    }
    const leftovers = report.holders.filter((holder) => holder.class === 'leftover');
    if (publish !== undefined && leftovers.length > 0 && !settings.dryRun) {
      // The kill grace can last seconds: say in `systemctl status` what the start is doing.
      publish(`stopping leftovers of this unit: ${leftovers.map(holderLabel).join(' ')} (SIGTERM, SIGKILL after ${formatDuration(settings.killGraceMs)})`);
    }
    // Each action is recorded (JSON and log) the moment it happens, so an interrupted grace
    // still reports every signal already sent.
    const signals = outcome.actions.signals;
    const actions = await reapStale(report, {
      dryRun: settings.dryRun,
      graceMs: settings.killGraceMs,
      signal: interrupted,
      onAction: (action) => {
        if (!signals.includes(action)) signals.push(action);
        const line = `kill-stale ${logfmt([['pid', action.pid], ['signal', action.signal], ['result', action.result], ['reason', action.reason]])}`;
        if (action.result === 'skipped') logger.notice(line);
        else logger.warning(line);
      },
    });
    const refused = actions.filter((action) => action.result === 'no-permission');
    if (refused.length > 0) {
      throw new CliError(`--kill-stale: no permission to signal ${refused.map((action) => action.pid).join(', ')} (run as the service's user or root)`, ExitCode.noPermission, 'no-permission');
    }
  }
  if (settings.cleanShm.length > 0) {
    const { cleanShm } = require('../host/shm') as typeof import('../host/shm');
    const results = await cleanShm(settings.cleanShm, { dryRun: settings.dryRun });
    outcome.actions.shm = results;
    for (const result of results) {
      (result.result === 'skipped' ? logger.notice.bind(logger) : logger.warning.bind(logger))(`clean-shm ${logfmt([['path', result.path], ['size', result.sizeBytes === null ? null : formatBytes(result.sizeBytes)], ['result', result.result], ['reason', result.reason]])}`);
    }
    const refused = results.filter((result) => result.result === 'no-permission');
    if (refused.length > 0) {
      throw new CliError(`--clean-shm: no permission to remove ${refused.map((result) => result.path).join(', ')}`, ExitCode.noPermission, 'no-permission');
    }
  }
  if (settings.stale === 'fail') {
    const holders = settings.killStale ? [] : stale;
    const leaked = settings.cleanShm.length > 0 ? [] : report.shm.leaked;
    if (holders.length > 0 || leaked.length > 0) {
      const what = [
        ...holders.map((holder) => `pid ${holder.pid} (${holder.class}: ${holder.reason})`),
        ...leaked.map((entry) => `${entry.path} (${formatBytes(entry.allocatedBytes)})`),
      ];
      throw new CliError(`--stale fail: stale resources found: ${what.join('; ')}`, ExitCode.tempFail, 'stale');
    }
  }
}

function recordError(error: unknown, outcome: Outcome, watch: InterruptWatch, elapsedMs: number, reporter: ProgressReporter): void {
  outcome.error = error;
  const e = error as { name?: unknown; evaluation?: unknown; message?: unknown };
  const message = error instanceof Error ? error.message : String(error);
  if (e.name === 'AbortError') {
    outcome.result = 'interrupted';
    outcome.exitCode = watch.exitCode();
    outcome.evaluation = (e.evaluation as EvaluationLike | null | undefined) ?? (reporter.last as EvaluationLike | null);
    outcome.reason = `interrupted by ${watch.received ?? 'SIGTERM'} after ${formatDuration(elapsedMs)}${outcome.evaluation === null ? '' : `: ${describeFailures(outcome.evaluation.devices) || 'GPUs free, not yet stable'}`}`;
    outcome.error = null;
    return;
  }
  if (e.name === 'GpuWaitTimeoutError') {
    outcome.result = 'timeout';
    outcome.exitCode = ExitCode.tempFail;
    outcome.evaluation = (e.evaluation as EvaluationLike | null | undefined) ?? null;
    outcome.reason = message;
    outcome.error = null;
    return;
  }
  const code = exitCodeForError(error);
  outcome.exitCode = code;
  outcome.reason = message;
  if (error instanceof CliError) outcome.result = error.result;
  else if (code === ExitCode.unavailable) outcome.result = 'unavailable';
  else if (code === ExitCode.config) outcome.result = 'config-error';
  else if (code === ExitCode.usage) outcome.result = 'usage-error';
  else if (code === ExitCode.osError) outcome.result = 'os-error';
  else {
    outcome.result = 'internal-error';
    outcome.reason = `internal error (a bug in gpugate, please report it): ${error instanceof Error && error.stack !== undefined ? error.stack : message}`;
  }
}

/** Log, print and publish the outcome (exactly once). */
function finalReport(
  kind: 'wait' | 'check',
  context: CommandContext,
  settings: CriteriaSettings,
  outcome: Outcome,
  reporter: ProgressReporter,
  elapsedMs: number,
  publish: StatusPublisher | undefined,
): void {
  const { logger } = context;
  const evaluation = outcome.evaluation;
  const elapsed = formatDuration(elapsedMs);
  if (outcome.exitCode === ExitCode.ok) {
    logger.notice(`ready ${logfmt([['gpus', evaluation === null ? null : indicesOf(evaluation)], ['elapsed', elapsed], ['polls', evaluation?.polls ?? null]])}`);
  } else {
    if (evaluation !== null && (outcome.result === 'timeout' || outcome.result === 'interrupted' || outcome.result === 'busy')) {
      const event = outcome.result === 'busy' ? 'busy' : outcome.result;
      if (kind === 'check') {
        for (const gpu of evaluation.devices) if (!gpu.ok) logger.error(gpuLine(event, gpu, {}));
      } else {
        reporter.logLastState(event, evaluation);
      }
    }
    logger.error(`${outcome.reason} (exit ${outcome.exitCode}/${exitCodeName(outcome.exitCode)})`);
  }
  if (settings.reportFile !== undefined) writeReportFile(settings.reportFile, outcome.reason, logger);
  // Success clears the status: the text would otherwise stay on the unit for the service's whole
  // life (systemd keeps the last STATUS= until someone sends another). A failure's reason stays.
  if (publish !== undefined) publish(outcome.exitCode === ExitCode.ok ? '' : `gpugate gave up: ${outcome.reason}`);
  if (settings.format === 'json') {
    const holders = evaluation !== null ? evaluation.devices.flatMap((gpu) => gpu.holders) : outcome.prepassHolders;
    const document: ResultJson = {
      command: kind,
      result: outcome.result,
      exitCode: outcome.exitCode,
      reason: outcome.reason,
      elapsedMs: Math.round(elapsedMs),
      polls: evaluation?.polls ?? 0,
      selection: outcome.selection,
      library: outcome.library,
      gpus: evaluation === null ? [] : evaluation.devices.map(gpuJson),
      stale: staleJson(holders, outcome.shm),
      actions: outcome.actions,
      error: errorJson(outcome.error),
    };
    context.stdout.write(jsonDocument(document));
  }
}
