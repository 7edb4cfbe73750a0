/**
 * What each read of a wait asks NVML for: memory every poll; process lists and the compute mode
 * only where the decision or its explanation needs them (a busy GPU whose memory holds still is
 * read for memory only); a read of the lists when a busy GPU's memory moved, so that the holders
 * it names are current; and a confirming read of every field before a verdict of "free" that
 * rests on fields carried over from an earlier read.
 */
import { monotonicMs } from '../monotonic-clock';
import type { NvmlSession, Snapshot } from '../types';
import { nothingLeftToFree, usedExcludingReserved } from './criteria';
import { evaluateRead, movedSinceListRead, type EvaluatedRead, type Evaluation, type GpuEvaluation, type GpuFailureReason, type WaitState } from './evaluation';
import { snapshotOptionsFor, type ReadPlan } from './poller';

/** The reasons a read that did not include every field may only seem to fail or pass by. */
const CARRIED_REASONS: ReadonlySet<GpuFailureReason> = new Set(['compute-mode', 'processes']);

/**
 * True when `read` would make the verdict "ready" but rests on process lists or a compute mode
 * carried over from an earlier read: the decision is then confirmed by a read of every field.
 * `partial`: the verdict may rest on some of the GPUs (a caller's accept predicate), so one GPU
 * that may pass on carried-over fields is enough to confirm.
 */
export function needsConfirmation(read: EvaluatedRead, partial = false): boolean {
  if (read.confirmed) return false;
  const mayPass = (gpu: GpuEvaluation): boolean => gpu.reasons.every((reason) => CARRIED_REASONS.has(reason));
  return partial ? read.evaluation.devices.some(mayPass) : read.evaluation.devices.every(mayPass);
}

/** The read that confirms a decision: memory, compute mode and process lists. */
export function confirmingPlan(state: WaitState): ReadPlan {
  return { processes: true, computeMode: true, full: state.full };
}

/**
 * True when the next poll may pass `gpu` if its memory reads as in this one: nothing but the
 * stability window or carried-over fields holds it back, and the window ends by then (it will
 * have lasted one interval more) or nothing is left to free.
 */
function mayPassNextPoll(gpu: GpuEvaluation, state: WaitState, intervalMs: number): boolean {
  if (!gpu.reasons.every((reason) => reason === 'unstable' || CARRIED_REASONS.has(reason))) return false;
  if (!gpu.reasons.includes('unstable') || gpu.stableForMs + intervalMs >= state.criteria.stableMs) return true;
  const known = state.known.get(gpu.migUuid ?? String(gpu.index));
  if (gpu.memory === null || known === undefined || known.processes === null) return false;
  const ignoredBytes = known.all.filter((holder) => !gpu.holders.includes(holder)).map((holder) => holder.usedBytes);
  return nothingLeftToFree(usedExcludingReserved(gpu.memory), gpu.holders, ignoredBytes, state.criteria.stableToleranceBytes);
}

/** What the poll after the latest one may decide on. */
export interface ReadAhead {
  intervalMs: number;
  /** The verdict may rest on some of the GPUs (a caller's accept predicate), not all. */
  partial: boolean;
}

/**
 * True when the next poll must read `gpu`'s process lists: nothing else tells about a GPU whose
 * memory is unreadable or in error; no list was read yet; used memory moved since the lists were
 * read (the holders may have changed); or an exclusive-process GPU whose memory passes, where a
 * context on it decides. A busy GPU whose memory holds still keeps the holders last read: it still
 * fails on memory, and those holders were read at the same used memory (within the tolerance).
 */
function listsNeeded(gpu: GpuEvaluation, state: WaitState): boolean {
  if (gpu.memory === null || gpu.reasons.includes('error')) return true;
  if (gpu.computeMode === 'exclusive_process' && !gpu.reasons.includes('memory')) return true;
  return movedSinceListRead(gpu.memory, state.known.get(gpu.migUuid ?? String(gpu.index)), state.criteria.stableToleranceBytes);
}

/**
 * What the next poll reads. Memory always. Process lists when the decision or its explanation
 * needs them: before anything is known, with noProcesses, and per {@link listsNeeded}; a busy GPU
 * whose memory holds still is read for memory only. The compute mode only on the first read, and
 * on a poll that may end the wait if memory holds still (every field then, so that no confirming
 * read re-reads memory); any other decision that would end the wait is confirmed with a fresh
 * read (see needsConfirmation).
 */
export function nextReadPlan(state: WaitState, ahead: ReadAhead): ReadPlan {
  const last = state.last;
  if (last === null) return confirmingPlan(state);
  const mayPass = (gpu: GpuEvaluation): boolean => mayPassNextPoll(gpu, state, ahead.intervalMs);
  if (ahead.partial ? last.devices.some(mayPass) : last.devices.every(mayPass)) return confirmingPlan(state);
  const processes = state.criteria.noProcesses || last.devices.some((gpu) => listsNeeded(gpu, state));
  return { processes, computeMode: false, full: state.full };
}

/** The read that brings a busy GPU's holders up to date after its memory moved (see EvaluatedRead.holdersOutdated). */
export function holdersPlan(state: WaitState): ReadPlan {
  return { processes: true, computeMode: false, full: state.full };
}

/** Reads the selected GPUs once per `plan` (outside the shared poll). */
export async function readOnce(session: NvmlSession, state: WaitState, plan: ReadPlan): Promise<{ snapshot: Snapshot; receivedAtMs: number }> {
  const snapshot = await session.snapshot(snapshotOptionsFor(plan, state.selection.indices));
  return { snapshot, receivedAtMs: monotonicMs() };
}

/**
 * Evaluates the first read of a wait or a check (taken by the caller, e.g. together with the stale
 * scan) as poll 1. `useStability` false for a one-sample check.
 */
export async function evaluateFirstRead(first: { snapshot: Snapshot; receivedAtMs: number }, state: WaitState, useStability: boolean): Promise<Evaluation> {
  const read = await evaluateRead(first.snapshot, confirmingPlan(state), first.receivedAtMs, state, useStability, state.polls + 1);
  if (read === null) throw new Error('internal error: the snapshot lacks a selected GPU');
  state.polls = read.evaluation.polls;
  state.last = read.evaluation;
  return read.evaluation;
}
