/**
 * The poll-latency benchmark harness (`npm run bench [-- --quick] [-- --out FILE]`).
 *
 * Runs every contender against the same library (the simulator, build/Release/gpugate_sim.so)
 * in one run, computes the ratios inside that run, prints a markdown report and writes the same
 * figures as JSON (bench/results/latest.json by default). The C programs are compiled here with
 * `cc -O2` into a gitignored scratch directory; scenarios are generated there too.
 */
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { BENCH_DEVICE_COUNTS, BENCH_PROCESS_COUNTS, writeBenchScenario } from './scenarios';
import { cliEntry, packageEntry, repoRoot, resultsDir, scratchDir, simulatorLibrary } from './paths';
import { measureWaitCalls, readSimCalls } from './nvml-calls';
import { measureEach, summarize, type LatencySummaryNs } from './stats';
import { renderReport } from './report';
import type { BenchReport, CodeCacheState, GoalResult, LatencyRow, ProcessModelRun, SizeKey } from './report-types';

// The process model is measured in this many processes, its goals judged on their median: where the
// scheduler keeps one process's threads decides, for that whole process, whose hand-off is cheap.
const PROCESS_MODEL_RUNS = 3;

const execFileAsync = promisify(execFile);

interface Settings {
  quick: boolean;
  /** Run the event-loop measure under `chrt -f 10` (real-time priority; needs the privilege). */
  realtime: boolean;
  /** Samples per in-process contender. */
  samples: number;
  targetBatchNs: number;
  warmupCalls: number;
  warmupMs: number;
  /** Mixed calls of every kind in each measuring process before the first contender. */
  globalWarmupMs: number;
  /** Subprocess polls per device count (execFile). */
  subprocessRuns: number;
  /** Polls per shell-loop sample, and the number of shell-loop samples. */
  shellLoopPolls: number;
  shellLoopSamples: number;
  eventLoopMs: number;
  rssSnapshots: number;
  /** Whole-process starts of `gpugate check` and of `node -e ''` each. */
  startRuns: number;
  out: string;
}

function parseArgs(argv: readonly string[]): Settings {
  let quick = false;
  let realtime = false;
  let out: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') quick = true;
    else if (arg === '--realtime') realtime = true;
    else if (arg === '--out') {
      const value = argv[++i];
      if (value === undefined) throw new Error('gpugate bench: --out needs a file path');
      out = value;
    } else if (arg === '--help' || arg === '-h') {
      process.stdout.write('usage: npm run bench [-- [--quick] [--realtime] [--out FILE]]\n');
      process.exit(0);
    } else {
      throw new Error(`gpugate bench: unknown argument ${JSON.stringify(arg)} (expected --quick, --realtime or --out FILE)`);
    }
  }
  return {
    quick,
    realtime,
    samples: quick ? 150 : 2000,
    targetBatchNs: 20_000,
    warmupCalls: quick ? 200 : 2000,
    warmupMs: quick ? 80 : 300,
    globalWarmupMs: quick ? 300 : 1000,
    subprocessRuns: quick ? 20 : 200,
    shellLoopPolls: quick ? 10 : 50,
    shellLoopSamples: quick ? 2 : 5,
    eventLoopMs: quick ? 500 : 3000,
    rssSnapshots: quick ? 50_000 : 1_000_000,
    startRuns: quick ? 5 : 30,
    out: out ?? path.join(resultsDir(), 'latest.json'),
  };
}

function requireFile(file: string, hint: string): void {
  if (!fs.existsSync(file)) throw new Error(`gpugate bench: ${file} is missing: ${hint}`);
}

async function compileC(source: string, output: string): Promise<void> {
  const root = repoRoot();
  const cc = process.env['CC'] ?? 'cc';
  try {
    await execFileAsync(cc, ['-O2', '-I', path.join(root, 'native'), '-o', output, source, '-ldl']);
  } catch (error) {
    throw new Error(`gpugate bench: compiling ${source} with ${cc} failed: ${(error as Error).message}`);
  }
}

/** Environment for anything that must read the simulator with a given scenario. */
function simEnv(scenario: string, statsFile?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GPUGATE_NVML_LIBRARY: simulatorLibrary(),
    GPUGATE_SIM_SCENARIO: scenario,
  };
  if (statsFile !== undefined) env['GPUGATE_SIM_STATS'] = statsFile;
  else delete env['GPUGATE_SIM_STATS'];
  return env;
}

/** Whether this Node compiles the bundled CLI with its code cache (as the timed `check` runs did), or null without a bundle. */
function codeCacheState(root: string): CodeCacheState | null {
  const cliDir = path.dirname(cliEntry(root));
  const codeCache = path.join(cliDir, 'code-cache.js');
  if (!fs.existsSync(codeCache)) return null;
  return (require(codeCache) as { compileBundle(dir: string): { cache: CodeCacheState } }).compileBundle(cliDir).cache;
}

/** The ratios a[i] ÷ b[i] of runs timed as pairs: median, least and greatest. */
function pairRatios(a: readonly number[], b: readonly number[]): { samples: number; median: number; min: number; max: number } {
  const ratios = a.map((value, i) => value / (b[i] as number)).sort((x, y) => x - y);
  const middle = Math.floor(ratios.length / 2);
  const median = ratios.length % 2 === 1 ? (ratios[middle] as number) : ((ratios[middle - 1] as number) + (ratios[middle] as number)) / 2;
  return { samples: ratios.length, median, min: ratios[0] as number, max: ratios[ratios.length - 1] as number };
}

/** Run a program, return its stdout; fail with its stderr. */
function runCapture(file: string, args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${path.basename(file)} ${args.join(' ')} exited ${code ?? signal}: ${stderr.trim()}`));
    });
  });
}

/** NVML initialisations recorded by the simulator's statistics file. */
function initCount(statsFile: string): number | null {
  if (!fs.existsSync(statsFile)) return null;
  const calls = readSimCalls(statsFile);
  return (calls['nvmlInit_v2'] ?? 0) + (calls['nvmlInit'] ?? 0) + (calls['nvmlInitWithFlags'] ?? 0);
}

/** How many times each identity query was answered, divided by the device count (1 = once per session). */
function identityReadsPerDevice(statsFile: string, devices: number): Record<string, number> | null {
  if (!fs.existsSync(statsFile)) return null;
  const calls = readSimCalls(statsFile);
  const sum = (names: string[]): number => names.reduce((total, name) => total + (calls[name] ?? 0), 0);
  return {
    name: sum(['nvmlDeviceGetName']) / devices,
    uuid: sum(['nvmlDeviceGetUUID']) / devices,
    pciBusId: sum(['nvmlDeviceGetPciInfo_v3', 'nvmlDeviceGetPciInfo_v2', 'nvmlDeviceGetPciInfo']) / devices,
    computeCapability: sum(['nvmlDeviceGetCudaComputeCapability']) / devices,
  };
}

/** The commit measured (with "+changes" when the work tree differs from it), or null outside git. */
async function gitCommit(root: string): Promise<string | null> {
  try {
    const { stdout: head } = await execFileAsync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root });
    const { stdout: status } = await execFileAsync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root });
    return `${head.trim()}${status.trim() === '' ? '' : ' +changes'}`;
  } catch {
    return null;
  }
}

function sizeKey(devices: number, processesPerDevice: number): SizeKey {
  return `${devices}x${processesPerDevice}`;
}

function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

async function main(): Promise<void> {
  const settings = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const loadAtStart = os.loadavg()[0] ?? 0;
  const root = repoRoot();
  requireFile(simulatorLibrary(root), 'build the native targets first (npx node-gyp rebuild, or npm run build)');
  requireFile(packageEntry(root), 'compile the TypeScript first (npm run build:ts)');
  const work = fs.mkdtempSync(path.join(scratchDir(root), 'run-'));
  try {
    await measureAll(settings, started, loadAtStart, root, work);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** Every measure of one run, in the scratch directory `work`; prints and writes the report. */
async function measureAll(settings: Settings, started: number, loadAtStart: number, root: string, work: string): Promise<void> {
  const binDir = path.join(work, 'bin');
  fs.mkdirSync(binDir);
  const floorBin = path.join(binDir, 'floor');
  const standinBin = path.join(binDir, 'nvidia-smi');
  await compileC(path.join(root, 'bench', 'c', 'floor.c'), floorBin);
  await compileC(path.join(root, 'scripts', 'gpu-validate', 'nvidia-smi-standin.c'), standinBin);
  const workerJs = path.join(__dirname, 'worker.js');

  const rows: LatencyRow[] = [];
  const threadPoolRatios: BenchReport['threadPoolRatios'] = [];
  const initCounts: Array<{ process: string; inits: number | null }> = [];
  const identityReads: BenchReport['identityReads'] = [];
  let memoryReadNs: number | null = null;
  let nativeReadPath: string | null = null;

  // In-process contenders and the C floor, per size.
  for (const devices of BENCH_DEVICE_COUNTS) {
    for (const processesPerDevice of BENCH_PROCESS_COUNTS) {
      const key = sizeKey(devices, processesPerDevice);
      const scenario = writeBenchScenario(work, { devices, processesPerDevice });
      log(`size ${key}: C floor`);
      for (const mode of ['memory', 'processes'] as const) {
        const out = await runCapture(
          floorBin,
          [simulatorLibrary(root), mode, String(settings.samples), String(settings.targetBatchNs)],
          simEnv(scenario),
          120_000,
        );
        const floor = JSON.parse(out) as { perSnapshotNs: LatencySummaryNs; batch: number; samples: number; memoryReadNs: number };
        rows.push({
          contender: mode === 'memory' ? 'cFloorMemory' : 'cFloorProcesses',
          size: key,
          devices,
          processesPerDevice,
          ns: { ...floor.perSnapshotNs, batch: floor.batch, samples: floor.samples },
        });
        if (mode === 'memory' && devices === 8 && processesPerDevice === 0) memoryReadNs = floor.memoryReadNs;
      }
      log(`size ${key}: gpugate in-process contenders`);
      const statsFile = path.join(work, `stats-${key}.json`);
      const params = {
        samples: settings.samples,
        targetBatchNs: settings.targetBatchNs,
        warmupCalls: settings.warmupCalls,
        warmupMs: settings.warmupMs,
        globalWarmupMs: settings.globalWarmupMs,
        processesPerDevice,
      };
      const out = await runCapture(process.execPath, [workerJs, 'latency', JSON.stringify(params)], simEnv(scenario, statsFile), 300_000);
      const result = JSON.parse(out) as {
        contenders: Record<string, LatencySummaryNs>;
        nativeReadPath: string | null;
        threadPoolRatios: Record<string, number>;
      };
      nativeReadPath = result.nativeReadPath ?? nativeReadPath;
      for (const [contender, ns] of Object.entries(result.contenders)) {
        rows.push({ contender, size: key, devices, processesPerDevice, ns });
      }
      for (const [contender, ratio] of Object.entries(result.threadPoolRatios)) threadPoolRatios.push({ contender, size: key, ratio });
      initCounts.push({ process: `worker ${key} (sync + async snapshots)`, inits: initCount(statsFile) });
      identityReads.push({ size: key, perDevice: identityReadsPerDevice(statsFile, devices) });
    }
  }

  // The nvidia-smi style subprocess poll, per device count.
  const smiArgs = ['--query-gpu=memory.used', '--format=csv,noheader,nounits'];
  for (const devices of BENCH_DEVICE_COUNTS) {
    const scenario = writeBenchScenario(work, { devices, processesPerDevice: 0 });
    const env = simEnv(scenario);
    log(`subprocess poll, ${devices} devices`);
    const execFileNs = await measureEach(async () => {
      const { stdout } = await execFileAsync(standinBin, smiArgs, { env });
      if (stdout.trim().split('\n').length !== devices) throw new Error(`stand-in printed ${JSON.stringify(stdout)}`);
    }, settings.subprocessRuns, 3);
    rows.push({ contender: 'subprocessExecFile', size: sizeKey(devices, 0), devices, processesPerDevice: 0, ns: execFileNs });
    const script = 'i=0; while [ "$i" -lt "$1" ]; do nvidia-smi "$2" "$3" >/dev/null || exit 1; i=$((i+1)); done';
    const shellEnv = { ...env, PATH: `${binDir}${path.delimiter}${process.env['PATH'] ?? ''}` };
    const loopSamples: number[] = [];
    for (let s = 0; s < settings.shellLoopSamples; s++) {
      const start = process.hrtime.bigint();
      await execFileAsync('sh', ['-c', script, 'sh', String(settings.shellLoopPolls), ...smiArgs], { env: shellEnv });
      loopSamples.push(Number(process.hrtime.bigint() - start) / settings.shellLoopPolls);
    }
    rows.push({
      contender: 'subprocessShellLoop',
      size: sizeKey(devices, 0),
      devices,
      processesPerDevice: 0,
      ns: summarize(loopSamples, settings.shellLoopPolls),
    });
  }

  // NVML in the helper process against NVML in this process, side by side (8 GPUs, memory only).
  log(`process model: helper process vs in-process, 8 GPUs, ${PROCESS_MODEL_RUNS} processes`);
  const modelScenario = writeBenchScenario(work, { devices: 8, processesPerDevice: 0 });
  const modelParams = {
    samples: settings.samples,
    targetBatchNs: settings.targetBatchNs,
    warmupCalls: settings.warmupCalls,
    warmupMs: settings.warmupMs,
    opens: settings.quick ? 10 : 40,
  };
  const processModel: NonNullable<BenchReport['processModel']> = { runs: [] };
  for (let run = 0; run < PROCESS_MODEL_RUNS; run++) {
    processModel.runs.push(
      JSON.parse(await runCapture(process.execPath, [workerJs, 'process-model', JSON.stringify(modelParams)], simEnv(modelScenario), 300_000)) as ProcessModelRun,
    );
  }

  // Event-loop delay while a process-list call takes 5 ms.
  log('event-loop delay with a 5 ms process-list call');
  const delayScenario = writeBenchScenario(work, { devices: 8, processesPerDevice: 2, processListDelayMs: 5 });
  const delayStats = path.join(work, 'stats-eventloop.json');
  // With --realtime the measuring process runs at real-time priority, so a shared machine's
  // scheduling delays do not masquerade as event-loop delay (it mostly sleeps: nobody starves).
  const eventLoopArgs = [workerJs, 'eventloop', JSON.stringify({ durationMs: settings.eventLoopMs })];
  const eventLoop = JSON.parse(
    settings.realtime
      ? await runCapture('chrt', ['-f', '10', process.execPath, ...eventLoopArgs], simEnv(delayScenario, delayStats), 120_000)
      : await runCapture(process.execPath, eventLoopArgs, simEnv(delayScenario, delayStats), 120_000),
  ) as BenchReport['eventLoop'];
  initCounts.push({ process: 'worker eventloop', inits: initCount(delayStats) });

  // Resident memory over many snapshots.
  log(`resident memory over ${settings.rssSnapshots} snapshots`);
  const rssScenario = writeBenchScenario(work, { devices: 8, processesPerDevice: 0 });
  const rssStats = path.join(work, 'stats-rss.json');
  const rss = JSON.parse(
    await runCapture(process.execPath, ['--expose-gc', workerJs, 'rss', JSON.stringify({ count: settings.rssSnapshots, path: 'snapshotSync' })], simEnv(rssScenario, rssStats), 600_000),
  ) as BenchReport['rss'];
  initCounts.push({ process: 'worker rss (snapshotSync)', inits: initCount(rssStats) });
  const rssPinnedStats = path.join(work, 'stats-rss-pinned.json');
  const rssNativeStats = path.join(work, 'stats-rss-native.json');
  // The same with V8's young generation pinned small: its stepwise growth is heap sizing, which
  // would otherwise hide (or fake) a leak of a few MB.
  const rssPinned = JSON.parse(
    await runCapture(
      process.execPath,
      ['--expose-gc', '--max-semi-space-size=1', workerJs, 'rss', JSON.stringify({ count: settings.rssSnapshots, path: 'snapshotSync' })],
      simEnv(rssScenario, rssPinnedStats),
      600_000,
    ),
  ) as BenchReport['rss'];
  initCounts.push({ process: 'worker rss (snapshotSync, young generation pinned)', inits: initCount(rssPinnedStats) });
  const rssNativeRead = JSON.parse(
    await runCapture(process.execPath, ['--expose-gc', workerJs, 'rss', JSON.stringify({ count: settings.rssSnapshots, path: 'readMemorySync' })], simEnv(rssScenario, rssNativeStats), 600_000),
  ) as BenchReport['rss'];
  initCounts.push({ process: 'worker rss (readMemorySync)', inits: initCount(rssNativeStats) });

  // Time to first answer: a whole `gpugate check` process against `node -e ''`.
  log('whole-process starts: gpugate check (with and without --stale ignore), node -e \'\', one stand-in run');
  let startup: BenchReport['startup'] = null;
  if (fs.existsSync(cliEntry(root))) {
    // Separate statistics files: the stand-in loads the simulator too and must not overwrite them.
    const checkStats = path.join(work, 'stats-check.json');
    const checkNoStaleStats = path.join(work, 'stats-check-nostale.json');
    const checkEnv = simEnv(rssScenario, checkStats);
    const checkNoStaleEnv = simEnv(rssScenario, checkNoStaleStats);
    const plainEnv = simEnv(rssScenario);
    const nodeEmpty: number[] = [];
    const check: number[] = [];
    const checkNoStale: number[] = [];
    const standin: number[] = [];
    let checkError: string | null = null;
    const timed = async (op: () => Promise<unknown>): Promise<number> => {
      const start = process.hrtime.bigint();
      await op();
      return Number(process.hrtime.bigint() - start);
    };
    for (let i = -1; i < settings.startRuns; i++) {
      const a = await timed(() => execFileAsync(process.execPath, ['-e', ''], { env: plainEnv }));
      let b = 0;
      let d = 0;
      try {
        b = await timed(() => execFileAsync(process.execPath, [cliEntry(root), 'check'], { env: checkEnv }));
        // The same without the stale pre-pass (the /proc scan), to show what that scan costs.
        d = await timed(() => execFileAsync(process.execPath, [cliEntry(root), 'check', '--stale', 'ignore'], { env: checkNoStaleEnv }));
      } catch (error) {
        checkError = (error as Error).message;
        break;
      }
      const c = await timed(() => execFileAsync(standinBin, smiArgs, { env: plainEnv }));
      if (i < 0) continue; // warm-up round
      nodeEmpty.push(a);
      check.push(b);
      checkNoStale.push(d);
      standin.push(c);
    }
    initCounts.push({ process: 'gpugate check (last run)', inits: initCount(checkStats) });
    initCounts.push({ process: 'gpugate check --stale ignore (last run)', inits: initCount(checkNoStaleStats) });
    startup =
      checkError === null
        ? {
            nodeEmptyNs: summarize(nodeEmpty, 1),
            gpugateCheckNs: summarize(check, 1),
            gpugateCheckNoStaleNs: summarize(checkNoStale, 1),
            standinNs: summarize(standin, 1),
            checkRatio: pairRatios(check, nodeEmpty),
            codeCache: codeCacheState(root),
            error: null,
          }
        : { nodeEmptyNs: null, gpugateCheckNs: null, gpugateCheckNoStaleNs: null, standinNs: null, checkRatio: null, codeCache: null, error: checkError };
  }

  // NVML calls of whole `gpugate wait` processes, counted by the simulator.
  log('NVML calls of gpugate wait, 8 GPUs idle and busy');
  const nvmlCalls = fs.existsSync(cliEntry(root))
    ? await measureWaitCalls(cliEntry(root), rssScenario, 8, simEnv(rssScenario), work)
    : null;
  if (nvmlCalls?.idleWait) initCounts.push({ process: 'gpugate wait --stable 0s', inits: initCount(path.join(work, 'stats-wait-idle.json')) });

  const report: BenchReport = {
    date: new Date(started).toISOString(),
    command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    quick: settings.quick,
    machine: {
      nproc: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      node: process.version,
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
    },
    loadAverage: { start: loadAtStart, end: os.loadavg()[0] ?? 0 },
    commit: await gitCommit(root),
    library: simulatorLibrary(root),
    settings: { ...settings, out: path.relative(root, settings.out) },
    memoryReadNs,
    nativeReadPath,
    rows,
    threadPoolRatios,
    eventLoop,
    rss,
    rssPinned,
    rssNativeRead,
    processModel,
    startup,
    nvmlCalls,
    initCounts,
    identityReads,
    goals: [] as GoalResult[],
    elapsedMs: 0,
  };
  const { markdown, goals } = renderReport(report);
  report.goals = goals;
  report.elapsedMs = Date.now() - started;
  fs.mkdirSync(path.dirname(settings.out), { recursive: true });
  fs.writeFileSync(settings.out, JSON.stringify(report, null, 2) + '\n');
  process.stdout.write(markdown + `\nJSON: ${path.relative(process.cwd(), settings.out) || settings.out} (${(report.elapsedMs / 1000).toFixed(1)} s)\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
