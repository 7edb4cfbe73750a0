#!/usr/bin/env node
/**
 * Leak soak: takes many snapshots WITH process lists through the real addon against the NVML
 * simulator and reports how much resident memory grew. The goal is under 5 MB over 10^6
 * snapshots (`npm run soak`); `npm run soak -- --count 20000` is a quick run. Exits 1 when the
 * growth is over the goal, 64 on a bad argument.
 *
 * Path: the blocking `session.snapshotSync({ processes: true })` by default (it exercises the
 * native reads, the flat encoding and the TypeScript decode without the event loop in between);
 * `--async` uses `session.snapshot()` instead (the worker thread and promise completions).
 *
 * `npm run soak` runs node with `--max-semi-space-size=1`: under sustained allocation V8 otherwise
 * grows its young generation in steps of several MB (visible as heap-total growth), which is heap
 * sizing, not a leak, and would hide a real leak of that size. Run `node --expose-gc
 * scripts/soak.mjs` to see the default behaviour; the heap-total growth is printed either way.
 *
 * Needs the native build (npx node-gyp rebuild) and dist/ (npm run build:ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const GOAL_BYTES = 5 * 1024 * 1024;
const MiB = 2 ** 20;
const GiB = 2 ** 30;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

function usage(message) {
  process.stderr.write(`soak: ${message}\nusage: node scripts/soak.mjs [--count N] [--async] [--json]\n`);
  process.exit(64);
}

function parseArgs(argv) {
  const options = { count: 1_000_000, async: false, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--async') options.async = true;
    else if (arg === '--json') options.json = true;
    else if (arg === '--count' || arg.startsWith('--count=')) {
      const text = arg === '--count' ? argv[++i] : arg.slice('--count='.length);
      const count = Number(text);
      if (text === undefined || !Number.isSafeInteger(count) || count < 1000) usage(`--count ${JSON.stringify(text ?? '')}: expected a whole number of snapshots >= 1000`);
      options.count = count;
    } else usage(`unknown argument ${JSON.stringify(arg)}`);
  }
  return options;
}

function device(index, extra = {}) {
  const hex = index.toString(16).padStart(12, '0');
  return {
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    uuid: `GPU-50a40000-0000-4000-8000-${hex}`,
    pciBusId: `00000000:${(0x20 + index).toString(16).toUpperCase()}:00.0`,
    minorNumber: index,
    memory: { totalBytes: 96 * GiB, reservedBytes: 471 * MiB, usedBytes: 3 * GiB },
    processes: [
      { pid: 4000 + index * 10, usedBytes: 2 * GiB, kinds: ['compute'], name: 'VLLM::Worker_TP0' },
      { pid: 4001 + index * 10, usedBytes: 512 * MiB, kinds: ['compute', 'graphics'], name: 'python3' },
      { pid: 4002 + index * 10, usedBytes: null, kinds: ['mps'], name: 'nvidia-cuda-mps-server' },
    ],
    ...extra,
  };
}

/** Four GPUs: processes on each, one in MIG mode with instances, one with a failing field (error strings). */
function soakScenario() {
  return {
    devices: [
      device(0),
      device(1, {
        migMode: true,
        migDevices: [0, 2].map((slot) => ({
          slot,
          uuid: `MIG-50a40000-0000-4000-8000-00000000010${slot}`,
          gpuInstanceId: slot + 1,
          computeInstanceId: 0,
          memory: { totalBytes: 24 * GiB, reservedBytes: 0, usedBytes: GiB },
          processes: [{ pid: 5000 + slot, usedBytes: GiB, kinds: ['compute'] }],
        })),
      }),
      device(2),
      device(3),
    ],
    faults: [{ function: 'nvmlDeviceGetTemperature', device: 3, return: 3 }],
  };
}

function rss() {
  return process.memoryUsage().rss;
}

function settle() {
  if (typeof globalThis.gc === 'function') {
    globalThis.gc();
    globalThis.gc();
  }
}

function mb(bytes) {
  return `${(bytes / MiB).toFixed(2)} MB`;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  let gpugate;
  try {
    gpugate = require(path.join(root, 'dist', 'index.js'));
  } catch (error) {
    usage(`cannot load dist/index.js (run npm run build:ts first): ${error.message}`);
  }
  const work = mkdtempSync(path.join(tmpdir(), 'gpugate-soak-'));
  try {
    const scenario = path.join(work, 'soak.json');
    writeFileSync(scenario, JSON.stringify(soakScenario(), null, 2));
    process.env.GPUGATE_SIM_SCENARIO = scenario;
    const libraryPath = gpugate.findSimLibrary();
    const session = await gpugate.openNvml({ libraryPath });
    const take = options.async ? () => session.snapshot({ processes: true }) : () => session.snapshotSync({ processes: true });

    // Check once that the snapshot really carries what the soak is meant to exercise.
    const first = await take();
    const listed = first.devices.reduce((n, d) => n + (d.processes?.length ?? 0), 0);
    if (first.devices.length !== 4 || listed !== 12 || first.devices[1].migDevices?.length !== 2 || !first.devices[3].fieldErrors.temperatureC) {
      throw new Error(`the soak scenario did not read as expected: ${JSON.stringify(first.devices.map((d) => [d.index, d.processes?.length, d.migDevices?.length]))}`);
    }

    const warmup = Math.max(1000, Math.floor(options.count / 20));
    for (let i = 0; i < warmup; i++) await take();
    settle();
    const baseline = rss();
    const baselineUsage = process.memoryUsage();
    const checkpoints = [];
    const every = Math.max(1, Math.floor(options.count / 10));
    const started = performance.now();
    let last = first;
    for (let i = 1; i <= options.count; i++) {
      last = await take();
      if (i % every === 0) {
        settle();
        const usage = process.memoryUsage();
        checkpoints.push({ snapshots: i, rssBytes: usage.rss, heapTotalBytes: usage.heapTotal, heapUsedBytes: usage.heapUsed, externalBytes: usage.external });
      }
    }
    const elapsedMs = performance.now() - started;
    settle();
    const finalRss = rss();
    const growth = finalRss - baseline;
    await session.close();
    const result = {
      path: options.async ? 'async snapshot({ processes: true })' : 'snapshotSync({ processes: true })',
      snapshots: options.count,
      devices: last.devices.length,
      processesPerSnapshot: listed,
      elapsedMs: Math.round(elapsedMs),
      microsecondsPerSnapshot: Number(((elapsedMs * 1000) / options.count).toFixed(2)),
      gcExposed: typeof globalThis.gc === 'function',
      rssBaselineBytes: baseline,
      rssFinalBytes: finalRss,
      rssGrowthBytes: growth,
      heapGrowthBytes: process.memoryUsage().heapUsed - baselineUsage.heapUsed,
      heapTotalGrowthBytes: process.memoryUsage().heapTotal - baselineUsage.heapTotal,
      externalGrowthBytes: process.memoryUsage().external - baselineUsage.external,
      goalBytes: GOAL_BYTES,
      pass: growth < GOAL_BYTES,
      checkpoints,
    };
    if (options.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    } else {
      process.stdout.write(
        `soak: ${result.snapshots} snapshots with processes (${result.path}), ${result.devices} GPUs, ${listed} processes each, ` +
          `${(elapsedMs / 1000).toFixed(1)} s (${result.microsecondsPerSnapshot} us per snapshot)\n` +
          `soak: RSS ${mb(baseline)} after warm-up -> ${mb(finalRss)} at the end: growth ${mb(growth)} (goal < ${mb(GOAL_BYTES)}) ${result.pass ? 'PASS' : 'FAIL'}\n` +
          `soak: V8 heap used ${mb(result.heapGrowthBytes)}, heap total ${mb(result.heapTotalGrowthBytes)}, external ${mb(result.externalGrowthBytes)} growth\n` +
          `soak: RSS at checkpoints: ${checkpoints.map((c) => `${c.snapshots}: ${mb(c.rssBytes)}`).join(', ')}\n`,
      );
    }
    process.exitCode = result.pass ? 0 : 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`soak: ${error && error.stack ? error.stack : String(error)}\n`);
  process.exit(70);
});
