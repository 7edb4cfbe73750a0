#!/usr/bin/env node
// What one inspectHolders call costs on this host, read through the simulator: the first call
// (which reads the caller's facts), the median of later calls with the default options, and the
// median of calls that search every process's open files and /dev/shm (scanHidden and scanShm
// true, what every call did before they were skipped for explained memory). Needs `npm run build`.
// Usage: node scripts/holders-cost.mjs [calls]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const root = path.resolve(import.meta.dirname, '..');
const { inspectHolders, openNvml } = require(path.join(root, 'dist', 'index.js'));
const calls = Number(process.argv[2] ?? 50);
const GiB = 2 ** 30;

// One GPU whose used memory this process explains: the common case of a host running its engine.
const dir = mkdtempSync(path.join(tmpdir(), 'gpugate-holders-cost-'));
const scenario = path.join(dir, 'scenario.json');
writeFileSync(scenario, JSON.stringify({ devices: [{ uuid: 'GPU-00000000-aaaa-bbbb-cccc-dddddddddddd', minorNumber: 0,
  memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 10 * GiB },
  processes: [{ pid: process.pid, usedBytes: 10 * GiB, name: 'node', kinds: ['compute'] }] }] }));
process.env.GPUGATE_SIM_SCENARIO = scenario;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
async function timed(options) {
  const start = performance.now();
  await inspectHolders(snapshot, options);
  return performance.now() - start;
}

const session = await openNvml({ libraryPath: path.join(root, 'build', 'Release', 'gpugate_sim.so') });
const snapshot = await session.snapshot({ processes: true });
try {
  const first = await timed({});
  const later = [];
  for (let i = 0; i < calls; i += 1) later.push(await timed({}));
  const deep = [];
  for (let i = 0; i < calls; i += 1) deep.push(await timed({ scanHidden: true, scanShm: true }));
  const processes = (await import('node:fs')).readdirSync('/proc').filter((name) => /^\d+$/.test(name)).length;
  console.log(JSON.stringify({ processes, calls, firstMs: +first.toFixed(1), laterMedianMs: +median(later).toFixed(2), searchingMedianMs: +median(deep).toFixed(1) }));
} finally {
  await session.close();
  rmSync(dir, { recursive: true, force: true });
}
