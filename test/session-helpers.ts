/**
 * Helpers for the addon and session tests: fresh copies of the simulator library (each copy is
 * a separate dlopen instance, so call counts and timelines start at zero), scenario files in
 * temp dirs, and the bundled scenarios.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const repoRoot = path.resolve(__dirname, '..');
const releaseDir = path.join(repoRoot, 'build', 'Release');

let tempRoot: string | undefined;

/** A temp directory for this test process (removed at exit). */
export function tempDir(): string {
  if (tempRoot === undefined) {
    tempRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'gpugate-session-test-'));
    const root = tempRoot;
    process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }));
  }
  return tempRoot;
}

let copies = 0;

/** A private copy of the simulator ('gpugate_sim' or the legacy build without _v2/_v3 symbols). */
export function freshSimulator(variant: 'gpugate_sim' | 'gpugate_sim_legacy' = 'gpugate_sim'): string {
  const source = path.join(releaseDir, `${variant}.so`);
  const target = path.join(tempDir(), `${variant}-${process.pid}-${copies++}.so`);
  fs.copyFileSync(source, target);
  return target;
}

/** Reads a bundled scenario as a plain object. */
export function bundledScenario(name: string): Record<string, unknown> & { devices: Array<Record<string, unknown>> } {
  return JSON.parse(fs.readFileSync(path.join(repoRoot, 'scenarios', name), 'utf8')) as Record<string, unknown> & {
    devices: Array<Record<string, unknown>>;
  };
}

let scenarios = 0;

/** Writes a scenario to a temp file, points GPUGATE_SIM_SCENARIO at it, and returns the path. */
export function useScenario(scenario: unknown): string {
  const file = path.join(tempDir(), `scenario-${scenarios++}.json`);
  fs.writeFileSync(file, JSON.stringify(scenario, null, 2));
  process.env['GPUGATE_SIM_SCENARIO'] = file;
  return file;
}

export const GiB = 1024 ** 3;
