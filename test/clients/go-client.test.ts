/**
 * Go NVML clients against every driver profile. go-nvml calls each NVML function by name through
 * cgo, leaving it for the dynamic loader to resolve from libnvidia-ml.so.1: a function the driver
 * lacks ends the program with "symbol lookup error" (exit 127) when it is called, or at start when
 * everything is bound at once. test/go-client/main.go is linked the same way (go-nvml itself is not
 * packaged by Debian, so it cannot be built offline here); the test writes, per profile, the C file
 * that references every function of that profile's header (sim/driver_profiles.h) and runs the
 * program as go-nvml's devices example runs: init, count, then each device's UUID and, where the
 * header has it, its addressing mode.
 *
 * Skipped (saying why) only when the Go toolchain is absent; .ci/run installs it (Debian golang-go).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simDriverProfiles, simProfileForScenario, type SimDriverProfile } from '../../src/simulator/sim-library';
import { bundledScenario, repoRoot, simDevice, simNvmlDir, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';

const SOURCE_DIR = path.join(repoRoot(), 'test', 'go-client');
// Go's build cache lives under build/ (ignored) so later runs reuse the compiled runtime.
const GO_CACHE = path.join(repoRoot(), 'build', 'go-client', 'cache');

function whyUnavailable(): string | null {
  const go = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (go.error !== undefined || go.status !== 0) return 'the Go toolchain is not installed (Debian: apt-get install golang-go)';
  return null;
}

const unavailable = whyUnavailable();
if (unavailable !== null) console.warn(`go-client tests skipped: ${unavailable}`);

const profiles = simDriverProfiles(repoRoot());
const current = profiles.find((p) => p.name === 'current')!;
let workDir = '';

/** The C file naming every function of `header` (a profile's symbols), as cgo code generated from it would. */
function headerFunctionsC(header: string[]): string {
  const hasAddressingMode = header.includes('nvmlDeviceGetAddressingMode');
  return [
    '/* Written by test/clients/go-client.test.ts: every function of one driver header, referenced by name. */',
    ...header.map((name) => `extern int ${name}();`),
    'void gpugate_reference_header_functions(void) {',
    ...header.map((name) => `  ${name}();`),
    '}',
    `int gpugate_header_has_addressing_mode(void) { return ${hasAddressingMode ? 1 : 0}; }`,
    'int gpugate_addressing_mode(void *device, unsigned int *mode) {',
    hasAddressingMode ? '  return nvmlDeviceGetAddressingMode(device, mode);' : '  (void)device; (void)mode; return 13; /* FUNCTION_NOT_FOUND: not in this header */',
    '}',
    '',
  ].join('\n');
}

/** Builds the Go client against the header of `headerOf`; returns the binary's path. */
function buildClient(headerOf: SimDriverProfile): string {
  const dir = path.join(workDir, headerOf.name);
  fs.mkdirSync(dir, { recursive: true });
  for (const file of ['go.mod', 'main.go']) fs.copyFileSync(path.join(SOURCE_DIR, file), path.join(dir, file));
  fs.writeFileSync(path.join(dir, 'functions.c'), headerFunctionsC(headerOf.symbols));
  const binary = path.join(dir, 'go-client');
  execFileSync('go', ['build', '-o', binary, '.'], {
    cwd: dir,
    env: { ...process.env, CGO_ENABLED: '1', GOCACHE: GO_CACHE, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOPATH: path.join(workDir, 'gopath') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return binary;
}

interface Run { code: number | null; stdout: string; stderr: string }

/** Runs `binary` against `profile`'s library as libnvidia-ml.so.1; `bindNow` binds every function at start. */
function run(binary: string, profile: SimDriverProfile, scenario: string, bindNow: boolean): Run {
  // The profile's library under the driver's file name: what dlopen finds, and what is preloaded (the same file).
  const dir = simNvmlDir(profile.name);
  const env: NodeJS.ProcessEnv = { ...process.env, GPUGATE_SIM_SCENARIO: scenario, LD_LIBRARY_PATH: dir };
  if (bindNow) Object.assign(env, { LD_BIND_NOW: '1', LD_PRELOAD: path.join(dir, 'libnvidia-ml.so.1') });
  const r = spawnSync(binary, [], { env, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function twoGpus(profile: SimDriverProfile): string {
  return writeScenario({ system: { driverProfile: profile.name }, devices: [simDevice(0), simDevice(1)] });
}

describe.skipIf(unavailable !== null)('a Go client linked as go-nvml links', () => {
  const binaries = new Map<string, string>();
  beforeAll(() => {
    workDir = makeTestTempDir('gpugate-go-client-');
    for (const profile of profiles) binaries.set(profile.name, buildClient(profile));
  }, 600_000);
  afterAll(() => {
    if (workDir !== '') fs.rmSync(workDir, { recursive: true, force: true });
  });

  it('runs the devices example on every profile, built against that profile\'s header, lazily and with every function bound at start', () => {
    expect(profiles.map((p) => p.name)).toEqual(['legacy', 'r470', 'r510', 'r535-early', 'r535', 'current']);
    for (const profile of profiles) {
      const scenario = twoGpus(profile);
      const mode = profile.symbols.includes('nvmlDeviceGetAddressingMode') ? ['mode=0'] : [];
      const expected = [`uuid=${simDevice(0).uuid as string}`, ...mode, `uuid=${simDevice(1).uuid as string}`, ...mode].join('\n');
      for (const bindNow of [false, true]) {
        const r = run(binaries.get(profile.name)!, profile, scenario, bindNow);
        expect({ profile: profile.name, bindNow, code: r.code, stderr: r.stderr, stdout: r.stdout.trim() }).toEqual({
          profile: profile.name, bindNow, code: 0, stderr: '', stdout: expected,
        });
      }
    }
    // Only the R580 header has the addressing-mode query the go-nvml v0.13 example calls.
    expect(profiles.filter((p) => p.symbols.includes('nvmlDeviceGetAddressingMode')).map((p) => p.name)).toEqual(['current']);
  });

  it('built for the R580 header, dies on an older driver as on a real one: at the first missing function it calls, or at start when bound at once', () => {
    const newest = binaries.get(current.name)!;
    for (const older of profiles.filter((p) => p !== current)) {
      const scenario = twoGpus(older);
      const lazy = run(newest, older, scenario, false);
      expect(lazy.code, older.name).toBe(127);
      expect(lazy.stderr, older.name).toContain('symbol lookup error');
      expect(lazy.stderr, older.name).toContain('undefined symbol: nvmlDeviceGetAddressingMode');
      expect(lazy.stdout, older.name).toContain(`uuid=${simDevice(0).uuid as string}`);
      const eager = run(newest, older, scenario, true);
      expect(eager.code, older.name).toBe(127);
      const missing = /undefined symbol: (nvml\w+)/.exec(eager.stderr)?.[1];
      expect(current.symbols, older.name).toContain(missing);
      expect(older.symbols, older.name).not.toContain(missing);
      expect(eager.stdout, older.name).toBe('');
    }
  });

  it('reads every shipped scenario through the library of its profile, as the example reads a real host', () => {
    const shipped = fs.readdirSync(path.join(repoRoot(), 'scenarios')).filter((f) => f.endsWith('.json')).sort();
    expect(shipped.length).toBeGreaterThan(0);
    for (const name of shipped) {
      const file = bundledScenario(name.replace(/\.json$/, ''));
      const profile = profiles.find((p) => p.name === simProfileForScenario(file, repoRoot()).name)!;
      const devices = (JSON.parse(fs.readFileSync(file, 'utf8')) as { devices: Array<{ uuid: string }> }).devices;
      const r = run(binaries.get(profile.name)!, profile, file, false);
      const uuids = [...r.stdout.matchAll(/^uuid=(.*)$/gm)].map((m) => m[1]);
      if (name === 'lost-gpu.json') {
        // GPU 5 has fallen off the bus: the example stops there, as go-nvml's log.Fatalf does.
        expect({ code: r.code, last: r.stdout.trim().split('\n').at(-1) }, name).toEqual({ code: 1, last: 'handle 5 failed: GPU is lost (15)' });
        expect(uuids, name).toEqual(devices.slice(0, 5).map((d) => d.uuid));
      } else {
        expect({ code: r.code, stderr: r.stderr }, name).toEqual({ code: 0, stderr: '' });
        expect(uuids, name).toEqual(devices.map((d) => d.uuid));
      }
    }
  });
});
