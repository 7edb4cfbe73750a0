/**
 * Timing and summary helpers of the benchmark harness: nearest-rank summaries, and batch
 * timing of a sync or async operation (a sample is a batch of calls timed together, divided by
 * the batch size, so the clock's own cost does not swamp a sub-microsecond call).
 */
import { nearestRankPercentile } from '../src/latency-figures';

/** Median / p99 / max / mean of per-operation times, in nanoseconds. */
export interface LatencySummaryNs {
  samples: number;
  /** Calls timed together per sample. */
  batch: number;
  median: number;
  p99: number;
  max: number;
  mean: number;
}

/** Summarise per-operation times (ns) measured with batches of `batch` calls. */
export function summarize(valuesNs: readonly number[], batch: number): LatencySummaryNs {
  const sorted = [...valuesNs].sort((a, b) => a - b);
  const total = sorted.reduce((sum, v) => sum + v, 0);
  return {
    samples: sorted.length,
    batch,
    median: nearestRankPercentile(sorted, 0.5),
    p99: nearestRankPercentile(sorted, 0.99),
    max: sorted[sorted.length - 1] as number,
    mean: total / sorted.length,
  };
}

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/** How to time an operation. */
export interface BatchPlan {
  /** Number of samples (batches) to take after warm-up and calibration. */
  samples: number;
  /** Size batches so that one lasts about this long. */
  targetBatchNs: number;
  /** Calls made before anything is timed (at least this many)... */
  warmupCalls: number;
  /** ...and for at least this long, so the JIT has optimised the hot path. */
  warmupMs: number;
}

const CALIBRATION_CALLS = 200;

/** Calls per batch so that a batch lasts about `targetBatchNs`. */
function batchFor(perCallNs: number, targetBatchNs: number): number {
  return Math.max(1, Math.min(1 << 20, Math.ceil(targetBatchNs / Math.max(perCallNs, 1))));
}

/** Time a synchronous operation in batches. */
export function measureSync(op: () => unknown, plan: BatchPlan): LatencySummaryNs {
  const warmUntil = nowNs() + plan.warmupMs * 1e6;
  for (let i = 0; i < plan.warmupCalls || nowNs() < warmUntil; i++) op();
  // Batch size from the mean of 200 calls (one slow call cannot skew it much).
  const probeStart = nowNs();
  for (let i = 0; i < CALIBRATION_CALLS; i++) op();
  const batch = batchFor((nowNs() - probeStart) / CALIBRATION_CALLS, plan.targetBatchNs);
  const values: number[] = [];
  for (let s = 0; s < plan.samples; s++) {
    const start = nowNs();
    for (let i = 0; i < batch; i++) op();
    values.push((nowNs() - start) / batch);
  }
  return summarize(values, batch);
}

/** Time `count` runs of an operation that cannot be batched (a subprocess), one sample each. */
export async function measureEach(op: () => Promise<unknown>, count: number, warmup: number): Promise<LatencySummaryNs> {
  for (let i = 0; i < warmup; i++) await op();
  const values: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = nowNs();
    await op();
    values.push(nowNs() - start);
  }
  return summarize(values, 1);
}

/** What {@link measureAsyncInterleaved} gives: each operation's summary, and its ratio to the yardstick. */
export interface InterleavedResult {
  summaries: Record<string, LatencySummaryNs>;
  /**
   * Per operation, the median over samples of its time divided by the yardstick's time in the
   * same sample: a pair measured moments apart, so the machine's drift cancels out.
   */
  ratiosToYardstick: Record<string, number>;
}

/**
 * Time several asynchronous operations interleaved: each sample times one batch of every
 * operation in turn (the order rotates from sample to sample), so all of them meet the same
 * machine state, and a ratio to the yardstick (the first operation) holds on an idle and on a
 * busy machine alike.
 */
export async function measureAsyncInterleaved(
  ops: Readonly<Record<string, () => Promise<unknown>>>,
  plan: BatchPlan,
): Promise<InterleavedResult> {
  const names = Object.keys(ops);
  const batches: number[] = [];
  for (const name of names) {
    const op = ops[name] as () => Promise<unknown>;
    const warmUntil = nowNs() + plan.warmupMs * 1e6;
    for (let i = 0; i < plan.warmupCalls || nowNs() < warmUntil; i++) await op();
    const probeStart = nowNs();
    for (let i = 0; i < CALIBRATION_CALLS; i++) await op();
    batches.push(batchFor((nowNs() - probeStart) / CALIBRATION_CALLS, plan.targetBatchNs));
  }
  const values: number[][] = names.map(() => []);
  for (let s = 0; s < plan.samples; s++) {
    for (let k = 0; k < names.length; k++) {
      const index = (s + k) % names.length;
      const op = ops[names[index] as string] as () => Promise<unknown>;
      const batch = batches[index] as number;
      const start = nowNs();
      for (let i = 0; i < batch; i++) await op();
      (values[index] as number[]).push((nowNs() - start) / batch);
    }
  }
  const yardstick = values[0] as number[];
  const ratiosToYardstick: Record<string, number> = {};
  for (let index = 1; index < names.length; index++) {
    const ratios = (values[index] as number[]).map((v, s) => v / (yardstick[s] as number)).sort((a, b) => a - b);
    ratiosToYardstick[names[index] as string] = nearestRankPercentile(ratios, 0.5);
  }
  return {
    summaries: Object.fromEntries(names.map((name, index) => [name, summarize(values[index] as number[], batches[index] as number)])),
    ratiosToYardstick,
  };
}
