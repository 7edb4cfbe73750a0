/**
 * What `gate()` reports: the result in one word, the one-line reason, the last evaluation, the
 * stale resources found and what was done about them, the library and the selection. Everything
 * the command renders (log, `--json`, `--report-file`, `--notify`) is in it.
 */
import type { ReapAction } from './reap';
import type { ShmCleanResult } from '../host/shm';
import type { LibraryInfo } from '../types';
import type { DeviceSelection } from './devices';
import type { Holder, HolderReport } from './stale';
import type { Evaluation } from './evaluation';

/**
 * How a gate ended. `ready`: every selected GPU is free (and stable, for a wait). `busy`: a check
 * found a GPU not free. `timeout`: a wait gave up. `interrupted`: the signal aborted it. `stale`:
 * `stale: 'fail'` found stale resources. `no-permission`: a requested action was refused.
 * `unavailable`: NVML is missing, failed or hung, or a GPU is lost. `config-error`: impossible
 * criteria or a selector that matches nothing. `os-error`: /proc or cgroupfs unreadable where
 * required. `internal-error`: a bug in gpugate.
 */
export type GateResult =
  | 'ready'
  | 'busy'
  | 'timeout'
  | 'interrupted'
  | 'stale'
  | 'no-permission'
  | 'unavailable'
  | 'config-error'
  | 'os-error'
  | 'internal-error';

/** The stale resources the scan before the first poll found (stale holders only). */
export interface GateStale {
  /** Holders of a stale class (holder-classes.ts), as classified by the scan. */
  holders: Holder[];
  /** Leaked /dev/shm segments and the tmpfs space; null when no scan ran. */
  shm: HolderReport['shm'] | null;
  /** The scan's full report (every holder, hidden holders, the unit's processes); null when no scan ran. */
  report: HolderReport | null;
}

/** What was done about stale resources, each recorded the moment it happened. */
export interface GateActions {
  signals: ReapAction[];
  shm: ShmCleanResult[];
}

/** The outcome of one gate. */
export interface GateOutcome {
  result: GateResult;
  /** One line saying why: what the log's last line, `--report-file` and `--json` say. */
  reason: string;
  elapsedMs: number;
  /** Polls evaluated (0 when none completed). */
  polls: number;
  /** The last evaluation, or null when none completed. */
  evaluation: Evaluation | null;
  stale: GateStale;
  actions: GateActions;
  /** The error that ended the gate (unavailable, config-error, os-error, internal-error), else null. */
  error: Error | null;
  /** The NVML library in use, once opened. */
  library: LibraryInfo | null;
  selection: DeviceSelection | null;
}
