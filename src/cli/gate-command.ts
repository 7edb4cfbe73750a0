/**
 * The body of `gpugate wait` and `gpugate check`: settings → gate() → the outcome rendered once,
 * in every form asked for (log, --json, --report-file, --notify) → the exit code; `wait -- CMD`
 * then runs CMD. What the gate does lives in the library (src/gate/gate.ts); this file only
 * logs its events and renders its outcome.
 */

import { monotonicMs } from '../monotonic-clock';
import type { GateEvent } from '../gate/gate';
import type { GateOutcome } from '../gate/gate-outcome';
import { formatBytes, formatDuration } from '../units';
import { engineViewText } from '../gate/engine-view';
import { cliAdvice } from './cli-advice';
import type { CommandContext } from './command-context';
import { criteriaOptionsOf, type CriteriaSettings, type WaitSettings } from './criteria-settings';
import { ExitCode, exitCodeForResult } from './exit-codes';
import { InterruptWatch } from './interrupt-watch';
import { errorJson } from './json-error';
import type * as JsonResult from './json-result';
import type { ResultJson } from './json-result';
import { commandDocument, type JsonEnvelope } from './json-envelope';
import { logEvent } from './logfmt';
import { outcomeEvent } from './outcome-event';
import type { Logger } from './logger';
import { gpuLine } from './progress-line';
import { ProgressReporter } from './progress-reporter';
import type * as ReportFile from './report-file';
import type * as RunWrapped from './run-wrapped';
import type * as StatusNotifier from './status-notifier';
import type { StatusPublisher } from './status-notifier';

// Lazy (require at the use): --json, --report-file, --notify and `wait -- CMD` code loads only
// for a run that asks for it, so a plain `check` starts close to a bare `node`.

/** Run `wait` (settings with timing) or `check` (one sample). Resolves to the exit code. */
export async function runGateCommand(kind: 'wait' | 'check', context: CommandContext, settings: CriteriaSettings | WaitSettings): Promise<number> {
  const { logger, env } = context;
  const startMs = monotonicMs();
  const timing = 'timeoutMs' in settings ? settings : null;
  const publish: StatusPublisher | undefined = settings.notify ? (require('./status-notifier') as typeof StatusNotifier).createStatusNotifier(env, logger) : undefined;
  const reporter = new ProgressReporter({
    logger,
    ...(timing !== null ? { timeoutMs: timing.timeoutMs, stableMs: timing.stableMs } : {}),
    ...(publish !== undefined ? { onStatus: publish } : {}),
  });
  // What the events said so far: what a report forced by a stuck NVML call can still show.
  const seen: Seen = { actions: { signals: [], shm: [] }, library: null, stale: { holders: [], shm: null, report: null } };
  let reported = false;
  const report = (outcome: GateOutcome, exitCode: number): void => {
    if (reported) return;
    reported = true;
    renderOutcome(kind, context, settings, outcome, exitCode, reporter, publish);
  };
  const watch = new InterruptWatch((signal) => {
    // The gate did not finish by itself within a second of the signal (NVML stuck): report now,
    // saying when the signal came (the command ends a grace period later).
    const elapsedMs = monotonicMs() - startMs;
    const evaluation = reporter.last;
    report(
      {
        result: 'interrupted',
        reason: `interrupted by ${signal} after ${formatDuration(watch.signalledAfterMs(startMs))}`,
        elapsedMs,
        polls: evaluation?.polls ?? 0,
        evaluation,
        stale: seen.stale,
        actions: seen.actions,
        error: null,
        library: seen.library,
        selection: evaluation?.selection ?? null,
      },
      exitCodeForResult('interrupted', signal),
    );
  });

  const { gate } = require('../gate/gate') as typeof import('../gate/gate');
  const outcome = await gate({
    mode: kind,
    ...(settings.libraryPath !== undefined ? { libraryPath: settings.libraryPath } : {}),
    callTimeoutMs: settings.callTimeoutMs,
    ...criteriaOptionsOf(settings),
    allowEmptySelection: settings.allowEmpty,
    stale: settings.stale,
    killStale: settings.killStale,
    killGraceMs: settings.killGraceMs,
    cleanShm: settings.cleanShm,
    dryRun: settings.dryRun,
    env,
    signal: watch.signal,
    ...(timing !== null
      ? { stableMs: timing.stableMs, stableToleranceBytes: timing.stableToleranceBytes, timeoutMs: timing.timeoutMs, intervalMs: timing.intervalMs }
      : {}),
    onPoll: (evaluation) => reporter.poll(evaluation),
    onEvent: (event) => logGateEvent(event, logger, reporter, publish, seen),
  });
  outcome.reason += cliAdvice(outcome.error, true);
  if (kind === 'check' && outcome.evaluation !== null) reporter.reportStaleHolders(outcome.evaluation.devices.flatMap((gpu) => gpu.holders));
  const exitCode = exitCodeForResult(outcome.result, watch.received);
  report(outcome, exitCode);
  if (exitCode !== ExitCode.ok || context.wrapped.length === 0) {
    watch.dispose();
    return exitCode;
  }
  logger.info(logEvent('running', [['command', context.wrapped.join(' ')]]));
  // The wrapper's listeners are in place before the watch's go: no moment without a handler.
  const status = (require('./run-wrapped') as typeof RunWrapped).runWrapped(context.wrapped, logger, env);
  watch.dispose();
  return status;
}

/** What the gate's events reported so far. */
interface Seen {
  actions: GateOutcome['actions'];
  library: GateOutcome['library'];
  stale: GateOutcome['stale'];
}

/** Log what the gate does or finds before its verdict, as it happens. */
function logGateEvent(event: GateEvent, logger: Logger, reporter: ProgressReporter, publish: StatusPublisher | undefined, seen: Seen): void {
  const actions = seen.actions;
  switch (event.kind) {
    case 'library':
      seen.library = event.library;
      logger.debug(logEvent('nvml', [['library', event.library.path], ['driver', event.library.driverVersion], ['nvml', event.library.nvmlVersion]]));
      return;
    case 'selection':
      for (const warning of event.selection.warnings) logger.warning(warning);
      return;
    case 'stale-scan':
      seen.stale = { holders: event.stale, shm: event.report.shm, report: event.report };
      reporter.reportStaleHolders(event.stale);
      if (event.report.nestedPidNamespace) {
        logger.info('holders cannot be attributed: gpugate runs in a nested PID namespace (use hostPID / --pid=host to see them); waiting on memory alone');
      }
      for (const entry of event.report.shm.leaked) {
        logger.warning(logEvent('stale-shm', [
          ['path', entry.path],
          ['size', formatBytes(entry.allocatedBytes)],
          ['size_bytes', entry.allocatedBytes],
          ['tmpfs_free', event.report.shm.tmpfsFreeBytes === null ? null : formatBytes(event.report.shm.tmpfsFreeBytes)],
          ['tmpfs_free_bytes', event.report.shm.tmpfsFreeBytes],
        ]));
      }
      return;
    case 'stale-scan-skipped':
      logger.warning(`stale scan skipped: ${event.error.message}`);
      return;
    case 'kill-stale-no-unit':
      logger.notice(logEvent('kill-stale', [['result', 'skipped'], ['reason', `gpugate is not in a systemd service's cgroup (${event.cgroup}): no holder can be proven a leftover of this service, nothing is signalled`]]));
      return;
    case 'kill-stale-starting': {
      // The kill grace can last seconds: say in `systemctl status` what the start is doing.
      const { holderLabel } = require('../gate/failure-text') as typeof import('../gate/failure-text');
      publish?.(`stopping leftovers of this unit: ${event.leftovers.map(holderLabel).join(' ')} (SIGTERM, SIGKILL after ${formatDuration(event.graceMs)})`);
      return;
    }
    case 'kill-stale': {
      const action = event.action;
      if (!actions.signals.includes(action)) actions.signals.push(action);
      const line = logEvent('kill-stale', [['pid', action.pid], ['signal', action.signal], ['result', action.result], ['reason', action.reason]]);
      if (action.result === 'skipped') logger.notice(line);
      else logger.warning(line);
      return;
    }
    case 'clean-shm': {
      const result = event.result;
      actions.shm.push(result);
      const line = logEvent('clean-shm', [['path', result.path], ['size', result.sizeBytes === null ? null : formatBytes(result.sizeBytes)], ['size_bytes', result.sizeBytes], ['result', result.result], ['reason', result.reason]]);
      if (result.result === 'skipped') logger.notice(line);
      else logger.warning(line);
      return;
    }
  }
}

/** Log, print and publish the outcome (exactly once). */
function renderOutcome(
  kind: 'wait' | 'check',
  context: CommandContext,
  settings: CriteriaSettings,
  outcome: GateOutcome,
  exitCode: number,
  reporter: ProgressReporter,
  publish: StatusPublisher | undefined,
): void {
  const { logger } = context;
  const evaluation = outcome.evaluation;
  // One figure for the log line and the JSON document: rounding the seconds of one and the
  // milliseconds of the other could tell 6.1s in one place and 6.2s in the other.
  const elapsedMs = Math.round(outcome.elapsedMs);
  if (exitCode === ExitCode.ok) {
    const gpus = evaluation === null ? null : evaluation.devices.map((gpu) => gpu.index).join(',') || '(none selected)';
    // elapsed_ms for programs; a person at a terminal reads elapsed.
    logger.notice(logEvent('ready', [['gpus', gpus], ['elapsed', formatDuration(elapsedMs)], ['elapsed_ms', logger.compact ? null : elapsedMs], ['polls', evaluation?.polls ?? null]]));
    for (const gpu of evaluation?.devices ?? []) if (gpu.engineView !== null) logger.notice(`GPU ${gpu.index}: ${engineViewText(gpu.engineView)}`);
  } else {
    if (evaluation !== null && (outcome.result === 'timeout' || outcome.result === 'interrupted' || outcome.result === 'busy')) {
      if (kind === 'check') {
        for (const gpu of evaluation.devices) if (!gpu.ok) logger.error(gpuLine(outcome.result, gpu, {}));
      } else {
        reporter.logLastState(outcome.result, evaluation);
      }
    }
    logger.error(outcomeEvent(outcome.result, outcome.reason, exitCode));
  }
  if (settings.reportFile !== undefined) (require('./report-file') as typeof ReportFile).writeReportFile(settings.reportFile, outcome.reason, logger);
  // Success clears the status: the text would otherwise stay on the unit for the service's whole
  // life (systemd keeps the last STATUS= until someone sends another). A failure's reason stays.
  if (publish !== undefined) publish(exitCode === ExitCode.ok ? '' : `gpugate gave up: ${outcome.reason}`);
  if (settings.format === 'json') {
    const holders = evaluation !== null ? evaluation.devices.flatMap((gpu) => gpu.holders) : outcome.stale.holders;
    const { gpuJson, staleJson } = require('./json-result') as typeof JsonResult;
    const fields: Omit<ResultJson, keyof JsonEnvelope> = {
      reason: outcome.reason,
      elapsedMs,
      polls: evaluation?.polls ?? 0,
      selection: outcome.selection === null ? null : { source: outcome.selection.source, warnings: outcome.selection.warnings },
      library:
        outcome.library === null
          ? null
          : { path: outcome.library.path, driverVersion: outcome.library.driverVersion, nvmlVersion: outcome.library.nvmlVersion, cudaDriverVersion: outcome.library.cudaDriverVersion },
      gpus: evaluation === null ? [] : evaluation.devices.map(gpuJson),
      stale: staleJson(holders, outcome.stale.shm),
      actions: { signals: outcome.actions.signals, shm: outcome.actions.shm },
      error: errorJson(outcome.error),
    };
    context.stdout.write(commandDocument({ command: kind, result: outcome.result, exitCode }, fields));
  }
}
