/**
 * Renders one benchmark run as markdown and judges the goals of performance.md on it. Every
 * ratio is computed from figures of the same run (machines here are shared and noisy, so an
 * absolute time alone means little).
 */
import { formatNanoseconds } from '../src/latency-figures';
import { MEMORY_READS, type CallCounts, type FurtherPollCalls } from './nvml-calls';
import type { BenchReport, GoalResult, LatencyRow, ProcessModelRun } from './report-types';
import type { LatencySummaryNs } from './stats';

const LABELS: Record<string, string> = {
  cFloorMemory: 'C floor, memory',
  cFloorProcesses: 'C floor, memory + process lists',
  nativeRead: 'readMemorySync(Float64Array): native read',
  snapshotSyncMemory: 'snapshotSync(), memory only',
  snapshotAsyncMemory: 'snapshot(), memory only',
  snapshotSyncProcesses: 'snapshotSync(), memory + processes',
  snapshotAsyncProcesses: 'snapshot(), memory + processes',
  snapshotAsyncFull: 'snapshot({ processes: true }), all fields',
  subprocessExecFile: 'nvidia-smi style: execFile per poll',
  subprocessShellLoop: 'nvidia-smi style: shell loop per poll',
};

/** The awaited contenders, each timed interleaved with the thread-pool round trip. */
const ASYNC_CONTENDERS = ['snapshotAsyncMemory', 'snapshotAsyncProcesses', 'snapshotAsyncFull'] as const;

const ORDER = Object.keys(LABELS);

/** A call count, with two decimals when it is not whole (a per-poll average). */
function formatCount(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

/** `nvmlDeviceGetMemoryInfo_v2 8, …`, largest first. */
function formatCalls(calls: CallCounts): string {
  const entries = Object.entries(calls).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return entries.length === 0 ? 'none' : entries.map(([name, n]) => `${name} ${formatCount(n)}`).join(', ');
}

function formatRatio(ratio: number | null): string {
  if (ratio === null || !Number.isFinite(ratio)) return '–';
  if (ratio >= 100) return `${ratio.toFixed(0)}×`;
  if (ratio >= 10) return `${ratio.toFixed(1)}×`;
  return `${ratio.toFixed(2)}×`;
}

function find(rows: readonly LatencyRow[], contender: string, size: string): LatencyRow | undefined {
  return rows.find((row) => row.contender === contender && row.size === size);
}

function floorFor(rows: readonly LatencyRow[], row: LatencyRow): LatencyRow | undefined {
  const contender = row.contender.endsWith('Processes') || row.contender.endsWith('Full') ? 'cFloorProcesses' : 'cFloorMemory';
  return find(rows, contender, row.size);
}

function subprocessFor(rows: readonly LatencyRow[], row: LatencyRow): LatencyRow | undefined {
  return find(rows, 'subprocessExecFile', `${row.devices}x0`);
}

function ratio(numerator: number | undefined, denominator: number | undefined): number | null {
  if (numerator === undefined || denominator === undefined || denominator <= 0) return null;
  return numerator / denominator;
}

function formatMs(summary: LatencySummaryNs): string {
  return `${(summary.median / 1e6).toFixed(2)} ms (${(summary.p99 / 1e6).toFixed(2)} ms)`;
}

function threadPoolRatio(report: BenchReport, contender: string, size: string): number | null {
  return report.threadPoolRatios.find((entry) => entry.contender === contender && entry.size === size)?.ratio ?? null;
}

/** The middle value of those measured (the lower middle of an even count); null when none was. */
function middle(values: ReadonlyArray<number | null | undefined>): number | null {
  const measured = values.filter((v): v is number => typeof v === 'number').sort((a, b) => a - b);
  return measured.length === 0 ? null : (measured[Math.floor((measured.length - 1) / 2)] as number);
}

/** What the helper adds to opening a session in one process-model run, in ms. */
function openCostMs(run: ProcessModelRun): number {
  return (run.openNs.helper.median - run.openNs.inProcess.median) / 1e6;
}

function goal(goalText: string, value: number | null, target: string, met: (v: number) => boolean, show: (v: number) => string): GoalResult {
  return { goal: goalText, measured: value === null ? 'not measured' : show(value), target, met: value === null ? null : met(value) };
}

/** Judge performance.md's goals on this run. */
export function judgeGoals(report: BenchReport): GoalResult[] {
  const rows = report.rows;
  const median = (contender: string, size: string): number | undefined => find(rows, contender, size)?.ns.median;
  const floor8 = median('cFloorMemory', '8x0');
  const goals: GoalResult[] = [];
  goals.push(goal('simulator cost per memory read (C loop, one handle)', report.memoryReadNs, '≤ 100 ns', (v) => v <= 100, formatNanoseconds));
  goals.push(goal('native memory read of 8 devices vs C floor', ratio(median('nativeRead', '8x0'), floor8), '≤ 3×', (v) => v <= 3, formatRatio));
  goals.push(goal('snapshotSync() memory only, 8 devices, vs C floor', ratio(median('snapshotSyncMemory', '8x0'), floor8), '≤ 10×', (v) => v <= 10, formatRatio));
  // A memory-only snapshot reads no process list, so the three 8-GPU processes time the same call:
  // their median leaves out one process whose threads the scheduler placed unluckily.
  const asyncRatios8 = ['8x0', '8x2', '8x8'].map((size) => threadPoolRatio(report, 'snapshotAsyncMemory', size));
  goals.push(
    goal(
      "`await snapshot({ memoryOnly: true })`, 8 devices, vs `await fs.promises.stat('/')` in the same process (median of the three 8-GPU processes)",
      middle(asyncRatios8),
      '≤ 1.2×',
      (v) => v <= 1.2,
      formatRatio,
    ),
  );
  const modelRuns = report.processModel?.runs ?? [];
  goals.push(
    goal(
      `helper process: \`await snapshot({ memoryOnly: true })\`, 8 devices, vs \`await fs.promises.stat('/')\` in the same process (median of ${modelRuns.length} processes)`,
      middle(modelRuns.map((run) => run.threadPoolRatios['helperSnapshotAsyncMemory'] ?? null)),
      '≤ 1.2×',
      (v) => v <= 1.2,
      formatRatio,
    ),
  );
  goals.push(
    goal(
      `helper process: openNvml() minus in-process openNvml() (spawning the helper and its NVML init), 8 devices, medians (median of ${modelRuns.length} processes)`,
      middle(modelRuns.map(openCostMs)),
      '≤ 5 ms',
      (v) => v <= 5,
      (v) => `${v.toFixed(2)} ms`,
    ),
  );
  const subprocess8 = median('subprocessExecFile', '8x0');
  goals.push(goal('snapshot() (async) faster than one subprocess poll, 8 devices', ratio(subprocess8, median('snapshotAsyncMemory', '8x0')), '≥ 1000×', (v) => v >= 1000, formatRatio));
  goals.push(goal('snapshotSync() faster than one subprocess poll, 8 devices', ratio(subprocess8, median('snapshotSyncMemory', '8x0')), '≥ 1000×', (v) => v >= 1000, formatRatio));
  goals.push(goal('snapshotSync() memory only: 16 vs 8 devices', ratio(median('snapshotSyncMemory', '16x0'), median('snapshotSyncMemory', '8x0')), '≤ 2.2×', (v) => v <= 2.2, formatRatio));
  goals.push(goal('snapshot() (async) memory only: 16 vs 8 devices', ratio(median('snapshotAsyncMemory', '16x0'), median('snapshotAsyncMemory', '8x0')), '≤ 2.2×', (v) => v <= 2.2, formatRatio));
  goals.push(goal('event-loop delay p99 while a 5 ms process-list call runs (async path)', report.eventLoop.asyncPath.delayP99Ms, '< 1 ms', (v) => v < 1, (v) => `${v.toFixed(3)} ms`));
  const count = report.rss.count.toLocaleString('en-US');
  goals.push(goal(`resident memory growth over ${count} snapshots, young generation pinned (leak check)`, report.rssPinned.rssGrowthBytes, '< 5 MB', (v) => v < 5_000_000, (v) => `${(v / 1e6).toFixed(2)} MB`));
  goals.push(goal(`resident memory growth over ${count} snapshots, default V8 flags`, report.rss.rssGrowthBytes, '< 5 MB', (v) => v < 5_000_000, (v) => `${(v / 1e6).toFixed(2)} MB`));
  const inits = report.initCounts.map((entry) => entry.inits);
  const allKnown = inits.every((n): n is number => n !== null);
  goals.push({
    goal: 'NVML initialisations per process',
    measured: allKnown ? [...new Set(inits)].join(', ') + ` (${inits.length} processes)` : 'not measured (no simulator statistics)',
    target: 'exactly 1',
    met: allKnown ? inits.every((n) => n === 1) : null,
  });
  const start = report.startup;
  // Judged pair by pair (the two spawned back to back), not as a ratio of two medians taken over a drifting machine.
  // The goal is set for Node 24 (its start-up is the yardstick); the label names the Node measured.
  goals.push(goal(`\`gpugate check\` whole process vs \`node -e ''\` on Node ${report.machine.node} (median of pairs)`, start?.checkRatio?.median ?? null, '≤ 1.2×', (v) => v <= 1.2, formatRatio));
  const calls = report.nvmlCalls;
  // 100 as set when the wait read only what it decides on, plus the recovery-action read each GPU's session adds (one per GPU, at open).
  goals.push(goal('NVML calls for one idle `gpugate wait --stable 0s`, 8 GPUs', calls?.idleWait?.total ?? null, '≤ 108', (v) => v <= 108, String));
  const devices = calls?.devices ?? 0;
  goals.push(memoryOnlyGoal('NVML calls per further poll while nothing changes, 8 GPUs', calls?.furtherPoll ?? null, devices));
  goals.push(memoryOnlyGoal('NVML calls per further poll of 8 busy GPUs whose memory holds still', calls?.busyPoll ?? null, devices));
  return goals;
}

/**
 * The goal that a further poll reads each GPU's memory once and nothing else (a poll that read
 * less decides on less than it must). A read still in flight when a wait times out is counted but
 * is no poll: the difference may be off by that one read of every GPU, never by more.
 */
function memoryOnlyGoal(name: string, further: FurtherPollCalls | null, devices: number): GoalResult {
  return {
    goal: name,
    measured: further === null ? 'not measured' : `${formatCount(further.total)}: ${formatCalls(further.perFunction)}`,
    target: `memory reads only (${devices})`,
    met:
      further === null
        ? null
        : Math.abs(further.total - devices) * (further.longer.polls - further.shorter.polls) <= devices &&
          Object.keys(further.perFunction).every((name) => MEMORY_READS.includes(name)),
  };
}

/** The markdown report of one run, and the goals judged on it. */
export function renderReport(report: BenchReport): { markdown: string; goals: GoalResult[] } {
  const lines: string[] = [];
  const goals = judgeGoals(report);
  lines.push(`# gpugate poll-latency benchmark${report.quick ? ' (--quick)' : ''}`, '');
  lines.push(`- date: ${report.date}`);
  lines.push(`- machine: ${report.machine.nproc} CPUs, ${report.machine.cpuModel}, ${report.machine.platform}, Node ${report.machine.node}`);
  lines.push(`- load average (1 min) at start / end: ${report.loadAverage.start.toFixed(2)} / ${report.loadAverage.end.toFixed(2)}`);
  lines.push(`- command: \`${report.command}\``);
  lines.push(`- commit: ${report.commit ?? 'unknown (not a git checkout)'}`);
  lines.push('- library: the simulator (build/Release/gpugate_sim.so), read by every contender');
  if (report.quick) {
    lines.push(`- --quick: fewer samples, and resident memory over ${report.rss.count.toLocaleString('en-US')} snapshots instead of 10⁶`);
  }
  lines.push('');
  lines.push('## Per snapshot (one poll of every device), after warm-up', '');
  lines.push('| contender | GPUs × processes | median | p99 | × C floor | subprocess poll ÷ this |');
  lines.push('|---|---|---:|---:|---:|---:|');
  const sorted = [...report.rows].filter((row) => row.contender !== 'threadPoolStat').sort(
    (a, b) =>
      a.devices - b.devices || a.processesPerDevice - b.processesPerDevice || ORDER.indexOf(a.contender) - ORDER.indexOf(b.contender),
  );
  for (const row of sorted) {
    const isFloor = row.contender.startsWith('cFloor');
    const floorRatio = isFloor ? null : ratio(row.ns.median, floorFor(report.rows, row)?.ns.median);
    const subprocessRatio = row.contender.startsWith('subprocess') ? null : ratio(subprocessFor(report.rows, row)?.ns.median, row.ns.median);
    lines.push(
      `| ${LABELS[row.contender] ?? row.contender} | ${row.devices} × ${row.processesPerDevice} | ${formatNanoseconds(row.ns.median)} | ${formatNanoseconds(row.ns.p99)} | ${isFloor ? '1×' : formatRatio(floorRatio)} | ${formatRatio(subprocessRatio)} |`,
    );
  }
  lines.push('');
  lines.push('In-process rows time batches of calls (a sample = a batch of about 20 µs, divided by its size);');
  lines.push('subprocess rows time every spawn. Process-list rows compare with the C floor that also reads the lists.');
  lines.push('"memory only" is `{ memoryOnly: true }`; "all fields" adds modes, utilisation, temperature and power (what `gpugate wait` polls).');
  if (report.nativeReadPath === null) lines.push('The addon offered no typed-array memory read: that contender is missing.');
  else lines.push(`Native read path: \`${report.nativeReadPath}\`.`);
  lines.push('');
  lines.push("## Awaited calls against a thread-pool round trip (`await fs.promises.stat('/')`)", '');
  lines.push("| GPUs × processes | stat('/') median | snapshot(), memory only | ÷ stat | snapshot(), memory + processes | ÷ stat | snapshot({ processes: true }) | ÷ stat |");
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const stat of report.rows.filter((row) => row.contender === 'threadPoolStat')) {
    const cells = ASYNC_CONTENDERS.flatMap((contender) => {
      const row = find(report.rows, contender, stat.size);
      return row === undefined ? ['–', '–'] : [formatNanoseconds(row.ns.median), formatRatio(threadPoolRatio(report, contender, stat.size))];
    });
    lines.push(`| ${stat.devices} × ${stat.processesPerDevice} | ${formatNanoseconds(stat.ns.median)} | ${cells.join(' | ')} |`);
  }
  lines.push('');
  lines.push('Each awaited call is a hand-off to a thread and back; its cost swings with the machine\'s idle state (waking a');
  lines.push('sleeping thread and core dominates), so each is timed in batches interleaved with the thread-pool round trip');
  lines.push('in the same process; "÷ stat" is the median over samples of each pair\'s ratio, and only that ratio is judged.');
  lines.push('');
  const modelRuns = report.processModel?.runs ?? [];
  if (modelRuns.length > 0) {
    lines.push('## NVML in the helper process vs in-process (8 GPUs, memory only)', '');
    lines.push(
      "| measuring process | helper process (default): `await snapshot({ memoryOnly: true })` | in-process (`nvmlProcess: 'in-process'`): the same | thread-pool round trip | helper ÷ stat | in-process ÷ stat | `openNvml()` then the first answer: helper (p99) | in-process (p99) | helper minus in-process |",
    );
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
    modelRuns.forEach((run, index) => {
      const ns = (name: string): string => formatNanoseconds(run.contenders[name]?.median ?? Number.NaN);
      const ratioOf = (name: string): string => formatRatio(run.threadPoolRatios[name] ?? null);
      lines.push(
        `| ${index + 1} | ${ns('helperSnapshotAsyncMemory')} | ${ns('inProcessSnapshotAsyncMemory')} | ${ns('threadPoolStat')} | ${ratioOf('helperSnapshotAsyncMemory')} | ${ratioOf('inProcessSnapshotAsyncMemory')} | ${formatMs(run.openNs.helper)} | ${formatMs(run.openNs.inProcess)} | ${openCostMs(run).toFixed(2)} ms |`,
      );
    });
    lines.push('');
    lines.push('Both sessions live in one process and are timed interleaved with the thread-pool round trip ("÷ stat": the');
    lines.push("median of pairs); the helper mode's open includes spawning `gpugate-nvml-helper`, loading the library there");
    lines.push('and its NVML init. The goals take the median of the measuring processes.', '');
  }
  lines.push('## Event loop while a process-list call takes 5 ms (8 GPUs × 2 processes)', '');
  lines.push('| what the loop does | snapshots | mean snapshot | delay p50 | delay p99 | delay max |');
  lines.push('|---|---:|---:|---:|---:|---:|');
  for (const [label, figures] of [
    ['no NVML call: the loop only waits (machine jitter, for reference)', report.eventLoop.idle],
    ['snapshot(), memory + processes (async)', report.eventLoop.asyncPath],
    ['snapshotSync(), memory + processes (blocking, for contrast)', report.eventLoop.syncPath],
  ] as const) {
    lines.push(
      `| ${label} | ${figures === report.eventLoop.idle ? '–' : figures.snapshots} | ${figures === report.eventLoop.idle ? '–' : `${figures.snapshotMeanMs.toFixed(2)} ms`} | ${figures.delayP50Ms.toFixed(3)} ms | ${figures.delayP99Ms.toFixed(3)} ms | ${figures.delayMaxMs.toFixed(3)} ms |`,
    );
  }
  lines.push(
    '',
    `perf_hooks.monitorEventLoopDelay at ${report.eventLoop.resolutionMs} ms resolution; the nominal interval is subtracted.` +
      (report.settings['realtime'] === true ? ' Measured under `chrt -f 10` (--realtime).' : ''),
    '',
  );
  lines.push('## Resident memory', '');
  lines.push('| calls | node flags | RSS before → after | growth | growth, second half | heap total growth | growth after each eighth (MB) |');
  lines.push('|---|---|---:|---:|---:|---:|---|');
  for (const rss of [report.rss, report.rssPinned, report.rssNativeRead]) {
    const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(2)} MB`;
    lines.push(
      `| ${rss.count.toLocaleString('en-US')} × ${rss.path} | \`${rss.nodeFlags}\` | ${(rss.rssBeforeBytes / 1e6).toFixed(1)} → ${(rss.rssAfterBytes / 1e6).toFixed(1)} MB | ${mb(rss.rssGrowthBytes)} | ${mb(rss.rssGrowthSecondHalfBytes)} | ${mb(rss.heapTotalGrowthBytes)} | ${rss.rssCheckpointsBytes.map((b) => (b / 1e6).toFixed(2)).join(', ')} |`,
    );
  }
  lines.push('', '8 GPUs; a forced GC before every reading. A leak keeps growing; heap and allocator sizing level off.', '');
  lines.push('## Time to first answer (whole processes, 8 GPUs)', '');
  const start = report.startup;
  if (start === null) lines.push('dist/cli/main.js is missing: not measured.');
  else if (start.error !== null) lines.push(`\`gpugate check\` failed: ${start.error}`);
  else if (start.nodeEmptyNs && start.gpugateCheckNs && start.gpugateCheckNoStaleNs && start.standinNs) {
    lines.push('| process | median | p99 | ÷ `node -e \'\'` |', '|---|---:|---:|---:|');
    for (const [label, ns] of [
      ["`node -e ''`", start.nodeEmptyNs],
      ['`gpugate check`', start.gpugateCheckNs],
      ['`gpugate check --stale ignore` (no /proc scan)', start.gpugateCheckNoStaleNs],
      ['one nvidia-smi-style run (stand-in)', start.standinNs],
    ] as const) {
      lines.push(`| ${label} | ${formatNanoseconds(ns.median)} | ${formatNanoseconds(ns.p99)} | ${formatRatio(ns.median / start.nodeEmptyNs.median)} |`);
    }
    if (start.checkRatio !== null) {
      const { samples, median, min, max } = start.checkRatio;
      lines.push('', `\`gpugate check\` ÷ \`node -e ''\` pair by pair (${samples} pairs spawned back to back): median ${formatRatio(median)}, least ${formatRatio(min)}, greatest ${formatRatio(max)}.`);
    }
    if (start.codeCache !== null) lines.push('', `The bundled CLI's build-time code cache, for this Node: ${start.codeCache}.`);
  }
  lines.push('', '## NVML calls of one `gpugate wait` (8 simulated GPUs, simulator call counts)', '');
  const calls = report.nvmlCalls;
  if (calls === null) lines.push('dist/cli/main.js is missing: not measured.');
  else if (calls.error !== null) lines.push(`not measured: ${calls.error}`);
  else if (calls.idleWait !== null && calls.furtherPoll !== null && calls.busyPoll !== null) {
    const { idleWait, furtherPoll, busyPoll } = calls;
    lines.push('| what | polls | NVML calls | per function |', '|---|---:|---:|---|');
    lines.push(`| \`gpugate ${idleWait.args.join(' ')}\` (idle, ready at once) | ${idleWait.polls} | ${idleWait.total} | ${formatCalls(idleWait.calls)} |`);
    for (const [what, further] of [['idle, 1 GiB in use by no listed process', furtherPoll], ['busy, 60 GiB held by a listed process', busyPoll]] as const) {
      for (const run of [further.shorter, further.longer]) {
        lines.push(`| \`gpugate ${run.args.join(' ')}\` (${what}; exit ${run.exitCode}) | ${run.polls} | ${run.total} | – |`);
      }
      lines.push(`| one further poll (${what.split(',')[0]}): the difference ÷ ${further.longer.polls - further.shorter.polls} polls | 1 | ${formatCount(further.total)} | ${formatCalls(further.perFunction)} |`);
    }
  }
  lines.push('', '## NVML initialisations per process (simulator call counts)', '');
  for (const entry of report.initCounts) lines.push(`- ${entry.process}: ${entry.inits ?? 'unknown'}`);
  lines.push('', 'Identity queries per device over each measuring process (thousands of snapshots each; 1 = read once per session):', '');
  for (const entry of report.identityReads) {
    const reads = entry.perDevice === null ? 'unknown' : Object.entries(entry.perDevice).map(([field, n]) => `${field} ${n}`).join(', ');
    lines.push(`- ${entry.size}: ${reads}`);
  }
  lines.push('', '## Goals', '');
  lines.push('| goal | measured | target | met |', '|---|---:|---:|:---:|');
  for (const g of goals) lines.push(`| ${g.goal} | ${g.measured} | ${g.target} | ${g.met === null ? '–' : g.met ? 'yes' : '**no**'} |`);
  return { markdown: lines.join('\n') + '\n', goals };
}
