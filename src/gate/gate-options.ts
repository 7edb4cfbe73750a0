/**
 * The options of the gate family: waitForGpusFree and checkGpusOnce take WaitOptions, gate()
 * takes those and a few of its own (the stale policy and actions); and what a wait resolves with.
 * Their defaults are gateDefaults (gate-defaults.ts); option-check.ts checks them.
 */
import type { ReapAction } from './reap';
import type { ShmCleanResult } from '../host/shm';
import type { NvmlSession } from '../types';
import type { CriteriaOptions } from './criteria';
import type { DeviceSelection } from './devices';
import type { Evaluation, GpuEvaluation } from './evaluation';
import type { GateOutcome } from './gate-outcome';
import type { Holder, HolderReport, InspectOptions } from './stale';

/** Options of waitForGpusFree (and checkGpusOnce, which ignores the timing ones); stableMs defaults to gateDefaults.stableMs (3 s) in a wait. */
export interface WaitOptions extends CriteriaOptions {
  /**
   * GPU selectors: NVML indices as numbers (`[0, 1]`) or strings, GPU-/MIG- UUIDs or unique prefixes,
   * PCI bus ids; default from the environment.
   */
  gpus?: ReadonlyArray<string | number>;
  /** An open session to use (left open); otherwise one is opened (shared in-process) and closed. */
  session?: NvmlSession;
  /** NVML library path when a session is opened here. */
  libraryPath?: string;
  /** Per-call NVML deadline when a session is opened here. */
  callTimeoutMs?: number;
  /** A wait gives up after this long (default gateDefaults.timeoutMs, 120 s; Infinity: never). */
  timeoutMs?: number;
  /** Time between polls (default gateDefaults.intervalMs, 500 ms). */
  intervalMs?: number;
  signal?: AbortSignal;
  /** Called after every evaluated poll. */
  onPoll?: (evaluation: Evaluation) => void;
  /** Classify holders on every poll (default true); an object gives the procfs roots etc. */
  inspectHolders?: boolean | InspectOptions;
  /** Environment for device selection (default process.env). */
  env?: NodeJS.ProcessEnv;
  /**
   * Accept a selection of no GPU at all (`gpus: []`, CUDA_VISIBLE_DEVICES=-1, NVIDIA_VISIBLE_DEVICES=none,
   * a host without GPUs) and succeed at once. Default false: an empty selection rejects with a
   * DeviceSelectionError, since "nothing to check" must not read as "free".
   */
  allowEmptySelection?: boolean;
}

/** Success of waitForGpusFree. */
export interface WaitResult {
  elapsedMs: number;
  polls: number;
  devices: GpuEvaluation[];
  evaluation: Evaluation;
}

/** What to do with stale holders and leaked /dev/shm files. */
export type StalePolicy = 'report' | 'fail' | 'ignore';

/** Something a gate did or found before its verdict, reported as it happens. */
export type GateEvent =
  /** NVML is open. */
  | { kind: 'library'; library: NonNullable<GateOutcome['library']> }
  /** The GPUs are selected (its warnings are for the operator). */
  | { kind: 'selection'; selection: DeviceSelection }
  /** The stale scan found these stale holders and leaked files (before any action). */
  | { kind: 'stale-scan'; stale: Holder[]; report: HolderReport }
  /** The stale scan could not read /proc; the gate goes on without it (only reporting needed it). */
  | { kind: 'stale-scan-skipped'; error: Error }
  /** `killStale` without a unit cgroup: no holder can be proven a leftover; `cgroup` is gpugate's own. */
  | { kind: 'kill-stale-no-unit'; cgroup: string }
  /** Leftovers are about to be stopped (SIGTERM, SIGKILL after `graceMs`). */
  | { kind: 'kill-stale-starting'; leftovers: Holder[]; graceMs: number }
  /** One signal action, recorded (or updated) the moment it happened. */
  | { kind: 'kill-stale'; action: ReapAction }
  /** One /dev/shm file removed, skipped or refused. */
  | { kind: 'clean-shm'; result: ShmCleanResult };

/** Options of {@link gate}: the criteria and selection of waitForGpusFree, plus the stale policy and actions. */
export interface GateOptions extends WaitOptions {
  /** 'wait' (default): poll until free and stable or timeoutMs; 'check': judge one read, no stability. */
  mode?: 'wait' | 'check';
  /** Default 'report': scan for stale resources before the first poll (a check scans only when 'fail' or an action needs it). */
  stale?: StalePolicy;
  /** Stop holders proven to be leftovers of an earlier activation of the caller's systemd service. */
  killStale?: boolean;
  /** Time between SIGTERM and SIGKILL for killStale (default gateDefaults.killGraceMs, 10 s). */
  killGraceMs?: number;
  /** Remove /dev/shm files matching these globs that no live process has open or mapped. */
  cleanShm?: string[];
  /** With killStale / cleanShm: say what would be done, do nothing. */
  dryRun?: boolean;
  /** Called with everything the gate does or finds before its verdict. */
  onEvent?: (event: GateEvent) => void;
  /**
   * Decides whether an evaluation is enough for the result 'ready' (default: every selected GPU
   * ok), for a caller that needs only some of the GPUs (selectGpus). A check asks it about its one
   * read ('busy' when it declines); a wait about every poll, one at a time and the newest first,
   * until it accepts one or the wait times out. A GPU that may pass on process lists or a compute
   * mode carried over from an earlier poll is read afresh before it is asked. Once asked, its answer
   * is awaited even when the timeout or the abort comes meanwhile, and a true answer then wins, so
   * what it did for an accepted evaluation (such as taking leases) is never reported as undone. An
   * error it throws ends the gate like any other (in `error`, with the result its class stands for).
   * A selection of no GPU (allowEmptySelection) is ready without asking it: there is nothing to judge.
   */
  accept?: (evaluation: Evaluation) => boolean | Promise<boolean>;
}
