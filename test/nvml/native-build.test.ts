/**
 * What a fresh clone's `npm install` builds (scripts/native-build.cjs): the addon and the simulator
 * library `gpugate demo` loads, nothing else; the simulator's other driver profiles come from one
 * target that never includes the addon, built only when a profile's file is missing.
 */
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QUICK_START_TARGETS, SIM_PROFILES_TARGET, buildSimProfiles, install, missingSimProfiles } from '../../scripts/native-build.cjs';
import { demoScenario } from '../../src/cli/demo-scenario';
import { simProfileForScenario } from '../../src/simulator/sim-library';
import { repoRoot, testTempDir } from '../helpers/sim';

interface GypTarget {
  target_name: string;
  type?: string;
  sources?: string[];
  dependencies?: string[];
  defines?: string[];
}

const root = repoRoot();
const gyp = JSON.parse(readFileSync(join(root, 'binding.gyp'), 'utf8')) as { variables?: Record<string, unknown>; targets: GypTarget[] };
const targets = gyp.targets;

/** A target's sources, with gyp's <@(list) items spliced in from the top-level variables. */
function sourcesOf(target: GypTarget): string[] {
  return (target.sources ?? []).flatMap((s) => {
    const list = /^<@\((\w+)\)$/.exec(s);
    const v = list === null ? undefined : gyp.variables?.[list[1]!];
    return Array.isArray(v) ? (v as string[]) : [s];
  });
}
/** The C++ files a unity source (`*.unity.cc`) compiles: its `#include "*.cc"` lines, relative to its folder. */
function unityMembers(source: string): string[] {
  const text = readFileSync(join(root, source), 'utf8');
  return [...text.matchAll(/^#include "([^"]+\.cc)"$/gm)].map((m) => join(dirname(source), m[1]!));
}

/** The C++ files a target compiles: its sources, with each unity source replaced by its members. */
function compiledFiles(target: GypTarget): string[] {
  return sourcesOf(target).flatMap((s) => (s.endsWith('.unity.cc') ? unityMembers(s) : [s]));
}

/** Every .cc file under `dir` (relative to the repository root), subfolders included. */
function cxxFilesUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.cc'))
    .map((name) => join(dir, name));
}

const profileTargets = targets.filter((t) => (t.defines ?? []).some((d) => d.startsWith('GPUGATE_SIM_LIBRARY_PROFILE='))).map((t) => t.target_name);
const profileTable = require(join(root, 'sim', 'profile-table.cjs')) as {
  readProfileTable(): { profiles: Array<{ token: string }> };
  driverNamePaths(token: string): string[];
};

/** A package tree holding the profile table and a build/Release with `files` in it. */
function packageTree(files: string[]): string {
  const tree = join(testTempDir(), `native-build-${Math.random().toString(36).slice(2)}`);
  cpSync(join(root, 'sim', 'profile-table.cjs'), join(tree, 'sim', 'profile-table.cjs'));
  cpSync(join(root, 'sim', 'driver_profiles.h'), join(tree, 'sim', 'driver_profiles.h'));
  mkdirSync(join(tree, 'build', 'Release'), { recursive: true });
  for (const file of files) {
    mkdirSync(dirname(join(tree, 'build', 'Release', file)), { recursive: true });
    writeFileSync(join(tree, 'build', 'Release', file), '');
  }
  return tree;
}

describe('npm install on a clone', () => {
  it('is the install script, and the script ships in the package (an install without a prebuild runs it)', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string>; files: string[] };
    expect(pkg.scripts['install']).toBe('node scripts/native-build.cjs install');
    expect(pkg.files).toContain('scripts/native-build.cjs');
  });

  it('builds the addon, the NVML helper it runs NVML in, and the simulator library the demo loads, and no other target', () => {
    const names = targets.map((t) => t.target_name);
    for (const target of QUICK_START_TARGETS) expect(names, target).toContain(target);
    const scenario = join(testTempDir(), 'demo-scenario.json');
    writeFileSync(scenario, JSON.stringify(demoScenario([101, 102, 103, 104, 105, 106, 107, 108])));
    expect([...QUICK_START_TARGETS].sort()).toEqual(['gpugate', 'gpugate-nvml-helper', simProfileForScenario(scenario, root).library].sort());
  });

  it('builds nothing where an addon already loads (this tree\'s build)', () => {
    expect(install(root)).toBe(false);
  });
});

describe('the simulator\'s driver profiles', () => {
  it('come from one target that depends on every profile library and not on the addon', () => {
    const target = targets.find((t) => t.target_name === SIM_PROFILES_TARGET);
    expect(target?.dependencies?.slice().sort()).toEqual(profileTargets.slice().sort());
    expect(target?.dependencies).not.toContain('gpugate');
  });

  it('are missing, each under the driver\'s file name, from a build of the quick-start targets only', () => {
    const expected = profileTable.readProfileTable().profiles.flatMap((p) => profileTable.driverNamePaths(p.token));
    expect(expected.length).toBeGreaterThan(profileTargets.length - 1);
    expect(missingSimProfiles(packageTree(['gpugate.node', 'gpugate_sim.so'])).sort()).toEqual(expected.sort());
    expect(missingSimProfiles(packageTree(expected.slice(1)))).toEqual([expected[0]]);
  });

  it('are not built again when every one is there (no node-gyp run: the tree has no Makefile to run it with)', () => {
    const expected = profileTable.readProfileTable().profiles.flatMap((p) => profileTable.driverNamePaths(p.token));
    expect(buildSimProfiles(packageTree(expected))).toBe(false);
    // The test run's own build has them all: the global setup built any that were missing.
    expect(missingSimProfiles(root)).toEqual([]);
  });
});

describe('binding.gyp compiles each source once', () => {
  it('no source is in two targets (but the profile file, below): code that several targets need is a static library they link', () => {
    const seen = new Map<string, string>();
    for (const target of targets.filter((t) => !profileTargets.includes(t.target_name))) {
      for (const source of compiledFiles(target)) {
        expect(seen.get(source), `${source} in ${target.target_name}`).toBeUndefined();
        seen.set(source, target.target_name);
      }
    }
    const statics = new Set(targets.filter((t) => t.type === 'static_library').map((t) => t.target_name));
    for (const target of targets.filter((t) => t.type !== 'none')) {
      for (const dependency of target.dependencies ?? []) expect(statics, `${target.target_name} -> ${dependency}`).toContain(dependency);
    }
  });

  it('each driver profile compiles only the file its profile define changes, and links the simulator\'s core', () => {
    // The sources that read the define (no header does: sim/symbols.h names it in a comment only).
    const defineUsers = [...new Set(targets.flatMap(compiledFiles))]
      .filter((source) => source.endsWith('.cc') && readFileSync(join(root, source), 'utf8').includes('GPUGATE_SIM_LIBRARY_PROFILE'));
    expect(defineUsers).toEqual(['sim/symbols.cc']);
    const cores = new Set<string>();
    for (const name of profileTargets) {
      const target = targets.find((t) => t.target_name === name)!;
      expect(sourcesOf(target), name).toEqual(defineUsers);
      expect(targets.filter((t) => !profileTargets.includes(t.target_name)).flatMap(sourcesOf)).not.toContain(defineUsers[0]);
      expect(target.dependencies, name).toHaveLength(1);
      cores.add(target.dependencies![0]!);
    }
    expect(cores.size).toBe(1);
  });

  it('every C++ file of native/ and sim/ is compiled, once: as a target\'s source or through one unity source of a static library', () => {
    const unitySources = targets.flatMap(sourcesOf).filter((s) => s.endsWith('.unity.cc'));
    expect(unitySources.length).toBeGreaterThan(0);
    for (const unity of unitySources) {
      const owners = targets.filter((t) => sourcesOf(t).includes(unity));
      expect(owners.map((t) => t.type), unity).toEqual(['static_library']);
      expect(unityMembers(unity).length, unity).toBeGreaterThan(1);
    }
    // The profile file is compiled once per profile (above); everything else once in all.
    const compiled = [...targets.filter((t) => !profileTargets.includes(t.target_name)).flatMap(compiledFiles), 'sim/symbols.cc'];
    expect([...compiled].sort()).toEqual([...new Set(compiled)].sort());
    const onDisk = [...cxxFilesUnder('native'), ...cxxFilesUnder('sim')].filter((f) => !f.endsWith('.unity.cc'));
    expect([...compiled].sort()).toEqual(onDisk.sort());
  });

  it('the addon and its NVML helper link the same NVML core', () => {
    const deps = ['gpugate', 'gpugate-nvml-helper'].map((name) => targets.find((t) => t.target_name === name)?.dependencies);
    expect(deps[0]).toHaveLength(1);
    expect(deps[1]).toEqual(deps[0]);
  });
});
