/**
 * `gpugate select --count N`: choose and lease N GPUs (selectGpus), print them on stdout as
 * `CUDA_VISIBLE_DEVICES=<GPU UUIDs>` (or one UUID per line, or the whole decision as JSON), log
 * the decision on stderr, and exit 0, or 75 when too few GPUs were eligible.
 */

import { monotonicMs } from '../../monotonic-clock';
import type { SelectCandidate, SelectResult, SelectedGpu } from '../../gate/select';
import { GpuLeaseError } from '../../host/gpu-lease';
import { FileSystemError, UnsafePathError } from '../../host/safe-file';
import type { NvmlSession } from '../../types';
import { formatDuration } from '../../units';
import { ErrorCode } from '../../gpugate-error';
import { cliAdvice } from '../cli-advice';
import { CliError } from '../cli-error';
import { criteriaOptionsOf } from '../criteria-settings';
import type { CommandContext } from '../command-context';
import { ExitCode, exitCodeForError } from '../exit-codes';
import { InterruptWatch } from '../interrupt-watch';
import { commandDocument } from '../json-envelope';
import { errorJson } from '../json-error';
import { gpuJson, type GpuJson, type ResultJson } from '../json-result';
import { logEvent } from '../logfmt';
import { outcomeEvent } from '../outcome-event';
import { closeSession, openSession, withBackstop } from '../nvml-session';
import { gpuLine } from '../progress-line';
import { parseSelectSettings, type SelectSettings } from '../select-settings';

/** The environment variable CUDA reads; UUIDs there mean the same GPU whatever CUDA_DEVICE_ORDER is. */
const CUDA_VISIBLE_DEVICES = 'CUDA_VISIBLE_DEVICES';

/** A chosen GPU as --json prints it. */
interface SelectedGpuJson {
  index: number;
  uuid: string;
  pciBusId: string | null;
  name: string | null;
  numaNode: number | null;
  lease: { path: string; holderPid: number | null; holderComm: string | null; holderStartTicks: number | null; createdAt: number; expiresAt: number | null } | null;
}

/** A considered GPU as --json prints it. */
interface CandidateJson {
  index: number;
  uuid: string;
  eligible: boolean;
  exclusions: string[];
  placement: { address: string; numaNode: number | null; hostBridge: string | null; upstream: string[] } | null;
  lease: { state: string; reason: string; holderPid: number | null; expiresAt: number | null } | null;
  gpu: GpuJson | null;
}

/** What the command decided, in every form it is printed. */
interface SelectOutcome {
  result: string;
  exitCode: number;
  reason: string;
  selection: SelectResult | null;
  error: unknown;
  library: ResultJson['library'];
}

function selectedJson(gpu: SelectedGpu): SelectedGpuJson {
  const lease = gpu.lease;
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    pciBusId: gpu.pciBusId,
    name: gpu.name,
    numaNode: gpu.numaNode,
    lease: lease === null || gpu.leasePath === null ? null : {
      path: gpu.leasePath,
      holderPid: lease.holderPid,
      holderComm: lease.holderComm,
      holderStartTicks: lease.holderStartTicks,
      createdAt: lease.createdAt,
      expiresAt: lease.expiresAt,
    },
  };
}

function candidateJson(candidate: SelectCandidate, selection: SelectResult): CandidateJson {
  const gpu = selection.evaluation?.devices.find((device) => device.uuid === candidate.uuid) ?? null;
  return {
    index: candidate.index,
    uuid: candidate.uuid,
    eligible: candidate.eligible,
    exclusions: [...candidate.exclusions],
    placement: candidate.placement === null ? null : { ...candidate.placement, upstream: [...candidate.placement.upstream] },
    lease: candidate.lease,
    gpu: gpu === null ? null : gpuJson(gpu),
  };
}

/**
 * The lease directory's failures: a path refused as unsafe or denied by the OS is 77 (with advice
 * only when not root), a lock held too long 75, a holder the host cannot check 78, any other OS
 * failure (ENOSPC, EROFS…) 71.
 */
function leaseFailure(error: unknown): CliError | null {
  if (error instanceof UnsafePathError) return new CliError(`lease: ${error.message}`, ExitCode.noPermission, 'no-permission', { cause: error });
  if (error instanceof FileSystemError) {
    if (error.code !== ErrorCode.fileAccess) return new CliError(`lease: ${error.message}`, ExitCode.osError, 'os-error', { cause: error });
    const advice = process.geteuid?.() === 0 ? '' : ' (run as root, or point GPUGATE_LEASE_DIR at a directory you may write)';
    return new CliError(`lease: ${error.message}${advice}`, ExitCode.noPermission, 'no-permission', { cause: error });
  }
  if (!(error instanceof GpuLeaseError)) return null;
  const message = `lease: ${error.message}${cliAdvice(error, false)}`;
  if (error.code === ErrorCode.leaseLockTimeout) return new CliError(message, ExitCode.tempFail, 'lease-busy');
  if (error.code === ErrorCode.leaseNamespace) return new CliError(message, ExitCode.config, 'config-error');
  if (error.code === ErrorCode.leaseHolderGone) return new CliError(message, ExitCode.usage, 'usage-error');
  return new CliError(message, ExitCode.osError, 'os-error');
}

/**
 * The process the lease is for: --lease-pid; else, without --lease, gpugate's parent (the shell,
 * the prolog), since gpugate exits once it has printed; with --lease alone, none: the duration
 * bounds it, so a parent that exits at once (a subshell) cannot end it early.
 */
function leaseHolderOf(settings: SelectSettings): number | null {
  if (!settings.lease) return null; // --no-lease takes none
  if (settings.leasePid !== undefined) return settings.leasePid;
  if (settings.leaseMs !== null) return null;
  // getppid() is 0 when the parent is outside gpugate's PID namespace (gpugate is the namespace's first process).
  if (process.ppid < 1) {
    throw new CliError("gpugate select: gpugate's parent is outside its PID namespace (getppid() is 0), so the lease cannot be bound to it: name the process with --lease-pid PID, or give --lease DUR", ExitCode.usage, 'usage-error');
  }
  return process.ppid;
}

function resultWord(error: unknown, code: number): string {
  if (error instanceof CliError) return error.result;
  if (code === ExitCode.unavailable) return 'unavailable';
  if (code === ExitCode.config) return 'config-error';
  if (code === ExitCode.usage) return 'usage-error';
  if (code === ExitCode.osError) return 'os-error';
  return 'internal-error';
}

/** Run `gpugate select`. */
export async function runSelect(context: CommandContext): Promise<number> {
  const settings = parseSelectSettings(context.values);
  const { logger } = context;
  const startMs = monotonicMs();
  const outcome: SelectOutcome = { result: 'internal-error', exitCode: ExitCode.software, reason: '', selection: null, error: null, library: null };
  let reported = false;
  const report = (): void => {
    if (reported) return;
    reported = true;
    finalReport(context, settings, outcome, monotonicMs() - startMs);
  };
  const watch = new InterruptWatch((signal) => {
    outcome.result = 'interrupted';
    outcome.exitCode = watch.exitCode();
    // When the signal came; the command ends a grace period later.
    outcome.reason = `interrupted by ${signal} after ${formatDuration(watch.signalledAfterMs(startMs))}`;
    report();
  });
  let session: NvmlSession | null = null;
  try {
    session = await openSession(settings.libraryPath, settings.callTimeoutMs);
    const library = session.library;
    outcome.library = { path: library.path, driverVersion: library.driverVersion, nvmlVersion: library.nvmlVersion, cudaDriverVersion: library.cudaDriverVersion };
    const { selectGpus } = require('../../gate/select') as typeof import('../../gate/select');
    const selecting = selectGpus({
      session,
      count: settings.count,
      wait: settings.wait,
      lease: settings.lease,
      leaseHolderPid: leaseHolderOf(settings),
      leaseDurationMs: settings.leaseMs,
      ...criteriaOptionsOf(settings),
      env: context.env,
      signal: watch.signal,
      ...(settings.wait
        ? { stableMs: settings.stableMs, stableToleranceBytes: settings.stableToleranceBytes, timeoutMs: settings.timeoutMs, intervalMs: settings.intervalMs }
        : {}),
      // Debug lines show only with -v.
      onPoll: (evaluation) => {
        for (const gpu of evaluation.devices) logger.debug(gpuLine('poll', gpu, {}));
      },
    });
    // One sample must not outlive a stuck driver; a wait is bounded by its own --timeout.
    const selection = settings.wait ? await selecting : await withBackstop(selecting, settings.callTimeoutMs * 2, 'reading the GPUs');
    outcome.selection = selection;
    outcome.reason = selection.reason;
    if (selection.result === 'selected') {
      outcome.result = 'selected';
      outcome.exitCode = ExitCode.ok;
    } else {
      outcome.result = selection.result;
      outcome.exitCode = ExitCode.tempFail;
    }
  } catch (caught) {
    const error = leaseFailure(caught) ?? caught;
    outcome.error = error;
    outcome.reason = error instanceof Error ? `${error.message}${error instanceof CliError ? '' : cliAdvice(error, false)}` : String(error);
    // Any abort (the wait's, or Node's own AbortError from a timer given the signal).
    if ((error as { code?: unknown }).code === ErrorCode.aborted) {
      outcome.result = 'interrupted';
      outcome.exitCode = watch.exitCode();
      outcome.reason = `interrupted by ${watch.received ?? 'SIGTERM'} after ${formatDuration(watch.signalledAfterMs(startMs))}`;
      outcome.error = null;
    } else {
      outcome.exitCode = exitCodeForError(error);
      outcome.result = resultWord(error, outcome.exitCode);
      if (outcome.result === 'internal-error') {
        outcome.reason = `internal error (a bug in gpugate, please report it): ${error instanceof Error && error.stack !== undefined ? error.stack : outcome.reason}`;
      }
    }
  }
  report();
  await closeSession(session);
  watch.dispose();
  return outcome.exitCode;
}

function finalReport(context: CommandContext, settings: SelectSettings, outcome: SelectOutcome, elapsedMs: number): void {
  const { logger } = context;
  const selection = outcome.selection;
  const chosen = selection?.gpus ?? [];
  // e.g. CUDA_VISIBLE_DEVICES ordinals read as NVML indices.
  for (const warning of selection?.evaluation?.selection.warnings ?? []) logger.warning(warning);
  // e.g. a lease whose holder the host cannot check.
  for (const warning of selection?.warnings ?? []) logger.warning(`lease: ${warning}`);
  if (outcome.exitCode === ExitCode.ok && selection !== null) {
    const lease = chosen[0]?.lease ?? null;
    logger.notice(logEvent('selected', [
      ['gpus', chosen.map((gpu) => gpu.index).join(',')],
      ['uuids', chosen.map((gpu) => gpu.uuid).join(',')],
      ['numa', [...new Set(chosen.map((gpu) => gpu.numaNode ?? '?'))].join(',')],
      ['lease_pid', lease === null ? (settings.lease ? null : 'none (--no-lease)') : lease.holderPid === null ? 'none' : `${lease.holderPid}${lease.holderComm === null ? '' : `/${lease.holderComm}`}`],
      ['lease_until', lease === null ? null : lease.expiresAt === null ? 'holder exits' : new Date(lease.expiresAt).toISOString()],
      ['elapsed', formatDuration(elapsedMs)],
      ['elapsed_ms', logger.compact ? null : Math.round(elapsedMs)],
    ]));
  } else {
    for (const candidate of selection?.candidates ?? []) {
      if (candidate.eligible) continue;
      const gpu = selection?.evaluation?.devices.find((device) => device.uuid === candidate.uuid);
      const leased = candidate.lease !== null && candidate.exclusions.includes('leased') ? candidate.lease.reason : null;
      if (gpu === undefined) continue;
      const line = gpuLine('not-eligible', gpu, {});
      logger.error(logEvent(line.event, [...line.pairs, ['excluded', candidate.exclusions.join(',')], ['lease', leased]]));
    }
    logger.error(outcomeEvent(outcome.result, outcome.reason, outcome.exitCode));
  }
  const cudaVisibleDevices = outcome.exitCode === ExitCode.ok ? selection?.cudaVisibleDevices ?? null : null;
  if (settings.selectFormat === 'json') {
    context.stdout.write(commandDocument({ command: 'select', result: outcome.result, exitCode: outcome.exitCode }, {
      reason: outcome.reason,
      elapsedMs: Math.round(elapsedMs),
      polls: selection?.polls ?? 0,
      count: settings.count,
      cudaVisibleDevices,
      selection: selection?.evaluation ? { source: selection.evaluation.selection.source, warnings: [...selection.evaluation.selection.warnings] } : null,
      library: outcome.library,
      gpus: chosen.map(selectedJson),
      candidates: selection === null ? [] : selection.candidates.map((candidate) => candidateJson(candidate, selection)),
      error: errorJson(outcome.error),
    }));
  } else if (cudaVisibleDevices !== null) {
    context.stdout.write(settings.selectFormat === 'list' ? chosen.map((gpu) => `${gpu.uuid}\n`).join('') : `${CUDA_VISIBLE_DEVICES}=${cudaVisibleDevices}\n`);
  }
}
