/**
 * Helpers for tests that run against gpugate's NVML simulator (sim/, built by `npx node-gyp
 * rebuild`): where the built libraries are, and how to write a scenario (docs/scenarios.md)
 * into a temp dir or replace one atomically so a running simulator reloads it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { simProfileForScenario } from '../../src/simulator/sim-library';
import { makeTestTempDir } from './temp-root';

/** The repository root (this file lives in test/helpers/). */
export function repoRoot(): string {
  return path.resolve(__dirname, '..', '..');
}

/** build/Release/gpugate_sim.so: the simulator, exporting every NVML version gpugate knows. */
export function simLibraryPath(): string {
  return path.join(repoRoot(), 'build', 'Release', 'gpugate_sim.so');
}

/** build/Release/gpugate_sim_legacy.so: the simulator of a driver before R470 (plain lists and memory, NVML 5.319 _v2 init and handles). */
export function simLegacyLibraryPath(): string {
  return path.join(repoRoot(), 'build', 'Release', 'gpugate_sim_legacy.so');
}

/**
 * build/Release/sim: a directory holding the simulator as libnvidia-ml.so.1 (for LD_LIBRARY_PATH);
 * with a profile name ("r535-early"), the directory holding that profile's library.
 */
export function simNvmlDir(profile?: string): string {
  const dir = path.join(repoRoot(), 'build', 'Release', 'sim');
  return profile === undefined ? dir : path.join(dir, profile);
}

/** build/Release/<library>.so for a library name of src/simulator/sim-library.ts (gpugate_sim_r535_early...). */
export function simProfileLibraryPath(library: string): string {
  return path.join(repoRoot(), 'build', 'Release', `${library}.so`);
}

/** The built simulator library that serves the scenario file (by its driver profile). */
export function simLibraryFor(scenarioPath: string): string {
  return simProfileLibraryPath(simProfileForScenario(scenarioPath, repoRoot()).library);
}

/** Writes a copy of a shipped scenario now, so its timeline starts now (the clock's default anchor). */
export function freshBundledScenario(name: string): string {
  return writeScenario(fs.readFileSync(bundledScenario(name), 'utf8'));
}

/** A scenario shipped in scenarios/, by file name with or without ".json". */
export function bundledScenario(name: string): string {
  return path.join(repoRoot(), 'scenarios', name.endsWith('.json') ? name : `${name}.json`);
}

/**
 * How long after replaceScenario() a call is guaranteed to see the new file: the simulator
 * checks the file at most every 5 ms; this adds margin for a busy machine.
 */
export const SIM_RELOAD_SETTLE_MS = 25;

/** A scenario object (see docs/scenarios.md); kept loose so tests can also write invalid ones. */
export type SimScenario = Record<string, unknown>;

let baseDir: string | null = null;

/**
 * A temp directory private to this test process, removed at exit (and, should the process be
 * killed, with the run's folder at the end of the run); scenarios and simulator copies go here.
 */
export function testTempDir(): string {
  if (baseDir === null) {
    baseDir = makeTestTempDir('gpugate-sim-');
    const dir = baseDir;
    process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  return baseDir;
}

let counter = 0;

/**
 * Writes `scenario` as JSON (2-space indent, so error line numbers are predictable) into a
 * fresh file under a per-process temp dir (removed at exit) and returns its path. A string is
 * written as is (useful for malformed JSON).
 */
export function writeScenario(scenario: SimScenario | string, fileName?: string): string {
  counter += 1;
  const file = path.join(testTempDir(), fileName ?? `scenario-${process.pid}-${counter}.json`);
  fs.writeFileSync(file, typeof scenario === 'string' ? scenario : `${JSON.stringify(scenario, null, 2)}\n`);
  return file;
}

/**
 * Replaces the scenario at `file` atomically (write a sibling temp file, then rename it over
 * `file`), as the simulator expects. A running simulator sees the change on its first call made
 * SIM_RELOAD_SETTLE_MS (at least 5 ms) later.
 */
export function replaceScenario(file: string, scenario: SimScenario | string): void {
  counter += 1;
  const tmp = `${file}.tmp-${process.pid}-${counter}`;
  fs.writeFileSync(tmp, typeof scenario === 'string' ? scenario : `${JSON.stringify(scenario, null, 2)}\n`);
  fs.renameSync(tmp, file);
}

/** Environment for a child process reading `scenarioPath` through the simulator. */
export function simEnv(scenarioPath: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { ...process.env, GPUGATE_SIM_SCENARIO: scenarioPath, ...extra };
}

/** One simulated GPU with sensible defaults; `overrides` replace whole keys. */
export function simDevice(index: number, overrides: SimScenario = {}): SimScenario {
  const hex = index.toString(16).padStart(12, '0');
  return {
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    uuid: `GPU-7e570000-0000-4000-8000-${hex}`,
    pciBusId: `00000000:${(0x10 + index).toString(16).toUpperCase().padStart(2, '0')}:00.0`,
    minorNumber: index,
    memory: { totalBytes: 97887 * 2 ** 20, reservedBytes: 471 * 2 ** 20, usedBytes: 0 },
    processes: [],
    ...overrides,
  };
}
