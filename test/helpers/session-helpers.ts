/**
 * Helpers for the addon and session tests: fresh copies of the simulator library (each copy is
 * a separate dlopen instance, so call counts and timelines start at zero), scenario files in
 * temp dirs, and the bundled scenarios. Where the simulator lives and how scenarios are written
 * comes from helpers/sim.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SimLibraryName } from '../../src/simulator/sim-library';
import { bundledScenario as bundledScenarioPath, repoRoot as repoRootDir, simProfileLibraryPath, testTempDir, writeScenario } from './sim';

import { GiB } from './fake-snapshot';
export { GiB };

export const repoRoot = repoRootDir();

/** A temp directory for this test process (removed at exit). */
export function tempDir(): string {
  return testTempDir();
}

let copies = 0;

/**
 * A private copy of a simulator library: 'gpugate_sim' (the current driver), 'gpugate_sim_legacy'
 * (no _v2/_v3 symbols), or another driver profile's ('gpugate_sim_r535_early'...).
 */
export function freshSimulator(variant: SimLibraryName = 'gpugate_sim'): string {
  const source = simProfileLibraryPath(variant);
  const target = path.join(tempDir(), `${variant}-${process.pid}-${copies++}.so`);
  fs.copyFileSync(source, target);
  return target;
}

/** Reads a bundled scenario as a plain object. */
export function bundledScenario(name: string): Record<string, unknown> & { devices: Array<Record<string, unknown>> } {
  return JSON.parse(fs.readFileSync(bundledScenarioPath(name), 'utf8')) as Record<string, unknown> & {
    devices: Array<Record<string, unknown>>;
  };
}

/** Writes a scenario to a temp file, points GPUGATE_SIM_SCENARIO at it, and returns the path. */
export function useScenario(scenario: unknown): string {
  const file = writeScenario(JSON.stringify(scenario, null, 2));
  process.env['GPUGATE_SIM_SCENARIO'] = file;
  return file;
}

/** A simulated RTX PRO 6000 (96 GiB) at NVML index `index` with `usedBytes` in use and these compute processes. */
export function rtxProDevice(index: number, usedBytes: number, processes: Array<{ pid: number; usedBytes: number }> = []): Record<string, unknown> {
  return {
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    uuid: `GPU-${String(index).padStart(8, '0')}-1111-2222-3333-444455556666`,
    pciBusId: `00000000:${(0x18 + index * 0x10).toString(16).toUpperCase()}:00.0`,
    minorNumber: index,
    computeCapability: [12, 0],
    memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes },
    persistenceMode: true,
    computeMode: 'default',
    migMode: false,
    utilization: { gpu: 0, memory: 0 },
    temperatureC: 30,
    powerWatts: 60,
    processes: processes.map((p) => ({ ...p, kinds: ['compute'] })),
  };
}

/** The NVML calls per function that a simulator wrote to its GPUGATE_SIM_STATS file. */
export function simCallsOf(file: string): Record<string, number> {
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { calls: Record<string, number> }).calls;
}
