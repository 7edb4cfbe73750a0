/**
 * The shape of one benchmark run's results: what bench/run.ts writes to bench/results/latest.json
 * and what bench/report.ts renders as markdown.
 */
import type { NvmlCallsReport } from './nvml-calls';
import type { LatencySummaryNs } from './stats';

/** `${devices}x${processesPerDevice}`, e.g. '8x2'. */
export type SizeKey = `${number}x${number}`;

/** One contender at one size: per-snapshot (or per-poll) times in nanoseconds. */
export interface LatencyRow {
  contender: string;
  size: SizeKey;
  devices: number;
  processesPerDevice: number;
  ns: LatencySummaryNs;
}

/** Event-loop delay figures of one path (milliseconds, the timer's nominal interval subtracted). */
export interface EventLoopFigures {
  snapshots: number;
  snapshotMeanMs: number;
  timerRuns: number;
  delayP50Ms: number;
  delayP99Ms: number;
  delayMaxMs: number;
}

/** One goal of performance.md, judged on this run. */
export interface GoalResult {
  goal: string;
  measured: string;
  target: string;
  /** null when the figure could not be measured in this run. */
  met: boolean | null;
}

/** Everything one run measured. */
export interface BenchReport {
  date: string;
  command: string;
  quick: boolean;
  machine: { nproc: number; cpuModel: string; node: string; platform: string };
  /** 1-minute load average when the run started and when it ended (the machine may be shared). */
  loadAverage: { start: number; end: number };
  /** `git rev-parse --short HEAD` of the measured tree, "+changes" when it had uncommitted edits. */
  commit: string | null;
  library: string;
  settings: Record<string, unknown>;
  /** The library's own cost of one memory read (C tight loop, one handle). */
  memoryReadNs: number | null;
  /** How the "addon, memory only" contender reached the native read (null: not offered). */
  nativeReadPath: string | null;
  rows: LatencyRow[];
  /**
   * Each awaited contender against `await fs.promises.stat('/')` timed interleaved with it: the
   * median over samples of the pair's ratio.
   */
  threadPoolRatios: Array<{ contender: string; size: SizeKey; ratio: number }>;
  eventLoop: { resolutionMs: number; idle: EventLoopFigures; asyncPath: EventLoopFigures; syncPath: EventLoopFigures };
  rss: {
    count: number;
    path: string;
    elapsedMs: number;
    rssBeforeBytes: number;
    rssAfterBytes: number;
    rssGrowthBytes: number;
    /** Growth over the second half only: a leak keeps growing, heap / allocator sizing levels off. */
    rssGrowthSecondHalfBytes: number;
    /** RSS minus the starting RSS after each eighth of the run. */
    rssCheckpointsBytes: number[];
    heapUsedGrowthBytes: number;
    /** V8's heap-total growth: young-generation resizing shows here, not in heapUsed. */
    heapTotalGrowthBytes: number;
    /** Node flags of the measuring process (e.g. --max-semi-space-size=1). */
    nodeFlags: string;
  };
  /** The same measure with V8's young generation pinned small (--max-semi-space-size=1): the leak check. */
  rssPinned: BenchReport['rss'];
  /** The same measure over the native read alone (no per-call allocation), for comparison. */
  rssNativeRead: BenchReport['rss'];
  /**
   * NVML in the session's helper process (the default) against NVML in the caller's process, 8 GPUs,
   * in each of PROCESS_MODEL_RUNS measuring processes: openNvml() time per mode (the helper's
   * includes spawning it), and the awaited memory snapshot of each with its median ratio to the
   * thread-pool round trip timed interleaved with it. Several processes because where the scheduler
   * keeps a process's threads, for the whole process, decides which hand-off is the cheap one.
   */
  processModel: { runs: ProcessModelRun[] } | null;
  startup: {
    nodeEmptyNs: LatencySummaryNs | null;
    gpugateCheckNs: LatencySummaryNs | null;
    /** `gpugate check --stale ignore`: without the /proc scan of the stale pre-pass. */
    gpugateCheckNoStaleNs: LatencySummaryNs | null;
    standinNs: LatencySummaryNs | null;
    /**
     * `gpugate check` ÷ `node -e ''`, pair by pair (each pair spawned back to back in this run),
     * so that a drift of the machine's speed between rounds cancels: the figure the goal judges.
     */
    checkRatio: { samples: number; median: number; min: number; max: number } | null;
    /** Whether the runs compiled the bundled CLI with its build-time V8 code cache (src/cli/code-cache.ts), asked with this Node. */
    codeCache: CodeCacheState | null;
    error: string | null;
  } | null;
  /** NVML calls of whole `gpugate wait` processes on 8 GPUs, idle and busy (null: dist/cli/main.js missing). */
  nvmlCalls: NvmlCallsReport | null;
  initCounts: Array<{ process: string; inits: number | null }>;
  /** Per measuring process: identity queries answered per device over the whole process (1 = read once per session). */
  identityReads: Array<{ size: string; perDevice: Record<string, number> | null }>;
  goals: GoalResult[];
  elapsedMs: number;
}

/** What became of the bundled CLI's code cache (src/cli/code-cache.ts's compileBundle). */
export type CodeCacheState = 'used' | 'rejected' | 'refused' | 'none';

/** One measuring process of the process model (bench/worker.ts, mode `process-model`). */
export interface ProcessModelRun {
  openNs: { helper: LatencySummaryNs; inProcess: LatencySummaryNs };
  contenders: Record<string, LatencySummaryNs>;
  threadPoolRatios: Record<string, number>;
}
