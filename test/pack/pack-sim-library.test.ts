/**
 * findSimLibrary finds the simulator where the addon is found: a local build first (build/Release,
 * build/Debug), then the package's prebuilds/<platform>-<arch>/; GPUGATE_PREBUILD redirects the
 * search, PREBUILDS_ONLY skips local builds, and a miss names every path tried. Real files in temp dirs.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SimLibraryNotFoundError, findSimLibrary, simLibraryCandidates } from '../../src/simulator/sim-library';

const tuple = `${process.platform}-${process.arch}`;
const ENV_KEYS = ['GPUGATE_PREBUILD', 'PREBUILDS_ONLY'] as const;
const saved: Record<string, string | undefined> = {};
let dir: string;

function touch(...parts: string[]): string {
  const p = join(dir, ...parts);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p, '');
  return p;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpugate-simlib-'));
  for (const k of ENV_KEYS) {
    saved[k] = process.env[k];
    delete process.env[k];
  }
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  for (const k of ENV_KEYS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

describe('findSimLibrary', () => {
  it('prefers a local build over the shipped prebuild', () => {
    const local = touch('build', 'Release', 'gpugate_sim.so');
    touch('prebuilds', tuple, 'gpugate_sim.so');
    expect(findSimLibrary({ packageRoot: dir })).toBe(local);
  });

  it('finds the prebuild when there is no local build', () => {
    const shipped = touch('prebuilds', tuple, 'gpugate_sim.so');
    expect(findSimLibrary({ packageRoot: dir })).toBe(shipped);
  });

  it('finds the legacy simulator by name', () => {
    touch('prebuilds', tuple, 'gpugate_sim.so');
    const legacy = touch('prebuilds', tuple, 'gpugate_sim_legacy.so');
    expect(findSimLibrary({ packageRoot: dir, name: 'gpugate_sim_legacy' })).toBe(legacy);
  });

  it('skips local builds under PREBUILDS_ONLY, as node-gyp-build does', () => {
    touch('build', 'Release', 'gpugate_sim.so');
    const shipped = touch('prebuilds', tuple, 'gpugate_sim.so');
    process.env['PREBUILDS_ONLY'] = '1';
    expect(findSimLibrary({ packageRoot: dir })).toBe(shipped);
  });

  it('searches GPUGATE_PREBUILD instead of the package root when it is set', () => {
    touch('build', 'Release', 'gpugate_sim.so');
    const redirected = touch('other', 'build', 'Release', 'gpugate_sim.so');
    process.env['GPUGATE_PREBUILD'] = join(dir, 'other');
    expect(findSimLibrary({ packageRoot: dir })).toBe(redirected);
  });

  it('throws SimLibraryNotFoundError naming every path tried', () => {
    let caught: unknown;
    try {
      findSimLibrary({ packageRoot: dir });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SimLibraryNotFoundError);
    const e = caught as SimLibraryNotFoundError;
    const expected = [join(dir, 'build/Release/gpugate_sim.so'), join(dir, 'build/Debug/gpugate_sim.so'),
      join(dir, 'prebuilds', tuple, 'gpugate_sim.so')];
    expect(e.tried).toEqual(expected);
    for (const p of expected) expect(e.message).toContain(p);
    expect(e.code).toBe('GPUGATE_SIM_LIBRARY_NOT_FOUND');
  });

  it('defaults to the package this module belongs to', () => {
    expect(simLibraryCandidates()[0]).toBe(resolve(__dirname, '..', '..', 'build', 'Release', 'gpugate_sim.so'));
  });
});
