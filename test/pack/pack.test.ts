/**
 * Pack smoke test: what `npm pack` produces installs on a host with no compiler and works from
 * CommonJS, ESM, TypeScript and the command line against the bundled simulator.
 *
 * The package is packed away from the working tree exactly as a release is (scripts/prepared-package.cjs:
 * a clean copy, then `npm pack`, whose prepack script runs prebuildify), then installed with npm into a
 * fresh temporary project whose PATH holds only node, npm, npx, sh and a few shell basics (no cc, c++,
 * gcc, g++, make, python3) and where CC and CXX are /bin/false, with install scripts allowed:
 * node-gyp-build's install step must find the prebuild instead of compiling.
 * The tarball's dependencies (node-gyp-build, node-addon-api) come from the npm cache or registry.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDocLinks, checkPackFiles, listTarball } from '../../scripts/pack-check.cjs';
import { preparePackage, repoRoot, type PreparedPackage } from '../../scripts/prepared-package.cjs';
import { PUBLIC_RUNTIME_NAMES } from '../helpers/public-api';

const SCENARIO_NAME = 'idle-8x-rtx-pro-6000.json';
const COMPILERS = ['cc', 'c++', 'gcc', 'g++', 'clang', 'clang++', 'make', 'python3', 'python'];
// What any GPU host has (the demo's fake engine worker is a bash titled like a vLLM worker).
const SHELL_BASICS = ['sh', 'bash', 'env', 'cat', 'ls', 'mkdir', 'rm', 'cp', 'mv', 'ln', 'chmod', 'tar', 'gzip',
  'uname', 'grep', 'sed', 'dirname', 'basename', 'sleep', 'kill', 'ps', 'true', 'false', 'head', 'tail', 'tr',
  'cut', 'wc', 'date', 'id', 'mktemp', 'readlink', 'realpath', 'touch', 'xargs', 'find', 'which'];

/** Variables that say how to reach the npm registry (CA files, proxies), carried into the consumer's environment. */
const REGISTRY_ACCESS = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'npm_config_cafile', 'npm_config_registry',
  'HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];

function which(name: string): string | null {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    const p = join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  return null;
}

/** A bin directory of symlinks to node, npm, npx and shell basics: no compiler can be found through it. */
function compilerFreeBin(dir: string): string {
  mkdirSync(dir);
  symlinkSync(process.execPath, join(dir, 'node'));
  // npm and npx: the real scripts next to this node (or on PATH), run by the node above.
  for (const tool of ['npm', 'npx']) {
    const candidate = join(dirname(process.execPath), tool);
    const p = existsSync(candidate) ? candidate : which(tool);
    if (p === null) throw new Error(`cannot find ${tool} to put on the compiler-free PATH`);
    symlinkSync(realpathSync(p), join(dir, tool));
  }
  for (const tool of SHELL_BASICS) {
    const p = which(tool);
    if (p !== null) symlinkSync(p, join(dir, tool));
  }
  return dir;
}

describe('npm pack: the tarball installs without a compiler and works', () => {
  let prepared: PreparedPackage;
  let work: string;
  let consumer: string;
  let env: NodeJS.ProcessEnv;
  let install: SpawnSyncReturns<string>;

  function inConsumer(cmd: string, args: string[], extraEnv: NodeJS.ProcessEnv = {}): SpawnSyncReturns<string> {
    return spawnSync(cmd, args, { cwd: consumer, env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 120_000 });
  }

  beforeAll(() => {
    prepared = preparePackage();
    work = mkdtempSync(join(tmpdir(), 'gpugate-pack-'));
    const bin = compilerFreeBin(join(work, 'bin'));
    consumer = join(work, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
    env = {
      HOME: process.env['HOME'] ?? work,
      PATH: bin,
      TMPDIR: tmpdir(),
      // The user's way to the registry: a CA or proxy given by variable (npm's global config file
      // lives beside whichever node runs npm, so a runtime from elsewhere does not see it).
      ...Object.fromEntries(REGISTRY_ACCESS.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]]]))),
      // Keep the user's npm config (registry, cache, CA file) but never a compiler or build settings.
      npm_config_ignore_scripts: 'false',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
      // And should anything look for a compiler by variable, it finds one that always fails.
      CC: '/bin/false',
      CXX: '/bin/false',
    };
    for (const c of COMPILERS) expect(existsSync(join(bin, c)), `${c} must not be on the test PATH`).toBe(false);
    install = inConsumer('npm', ['install', '--prefer-offline', '--foreground-scripts', prepared.tarball]);
  }, 600_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('packs a prebuilt addon, the simulator, sources and build files, and no build output or tests', () => {
    const files = listTarball(prepared.tarball);
    expect(checkPackFiles(files)).toEqual([]);
    expect(files).toContain('prebuilds/linux-x64/gpugate.glibc.node');
    expect(files).toContain(`scenarios/${SCENARIO_NAME}`);
  });

  it('installs with install scripts on and no compiler on PATH, using the prebuild (nothing compiled)', () => {
    expect(install.status, `npm install failed (${install.error?.message ?? `signal ${install.signal}`}):\n${install.stdout}\n${install.stderr}`).toBe(0);
    const pkgDir = join(consumer, 'node_modules', 'gpugate');
    expect(existsSync(join(pkgDir, 'prebuilds', 'linux-x64', 'gpugate.glibc.node'))).toBe(true);
    // node-gyp-build ran (install script) and found the prebuild: no build/ was made.
    expect(existsSync(join(pkgDir, 'build'))).toBe(false);
  });

  it('loads from CommonJS: require("gpugate") finds the prebuild and exports the API', () => {
    const r = inConsumer('node', ['-e', `
      const g = require('gpugate');
      const resolved = require('node-gyp-build').resolve(require('path').dirname(require.resolve('gpugate/package.json')));
      console.log(JSON.stringify({ openNvml: typeof g.openNvml, findSimLibrary: typeof g.findSimLibrary,
        NativeLoadError: typeof g.NativeLoadError, sim: g.findSimLibrary(), resolved }));`]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, string>;
    expect(out).toMatchObject({ openNvml: 'function', findSimLibrary: 'function', NativeLoadError: 'function' });
    expect(out['sim']).toBe(join(realpathSync(consumer), 'node_modules/gpugate/prebuilds/linux-x64/gpugate_sim.so'));
    expect(out['resolved']).toMatch(/node_modules\/gpugate\/prebuilds\/linux-x64\/gpugate\.glibc\.node$/);
  }, 60000);

  it('loads from ESM: import { openNvml } from "gpugate" gives the same exports as require, exactly the public names', () => {
    writeFileSync(join(consumer, 'esm.mjs'), `
      import { createRequire } from 'node:module';
      import * as ns from 'gpugate';
      import { openNvml } from 'gpugate';
      const cjs = createRequire(import.meta.url)('gpugate');
      // Node adds 'default', 'module.exports' and tsc's '__esModule' marker to a CommonJS namespace.
      const esmNames = Object.keys(ns).filter((k) => !['default', 'module.exports', '__esModule'].includes(k)).sort();
      console.log(JSON.stringify({ openNvml: typeof openNvml, same: openNvml === cjs.openNvml,
        esmNames, cjsNames: Object.keys(cjs).sort() }));
    `);
    const r = inConsumer('node', ['esm.mjs']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { openNvml: string; same: boolean; esmNames: string[]; cjsNames: string[] };
    expect(out.openNvml).toBe('function');
    expect(out.same).toBe(true);
    expect(out.esmNames).toEqual(out.cjsNames);
    expect(out.cjsNames).toEqual([...PUBLIC_RUNTIME_NAMES].sort());
  }, 60000);

  it('type-checks a TypeScript consumer (CommonJS and ESM) with tsc against the shipped declarations', () => {
    writeFileSync(join(consumer, 'consumer.ts'), `
      import { openNvml, findSimLibrary, NativeLoadError, type Snapshot, type NvmlSession } from 'gpugate';
      export async function usedBytes(): Promise<number[]> {
        const session: NvmlSession = await openNvml({ libraryPath: findSimLibrary() });
        const snap: Snapshot = await session.snapshot();
        await session.close();
        return snap.devices.map((d) => d.memory?.usedBytes ?? 0);
      }
      export const isLoadError = (e: unknown): boolean => e instanceof NativeLoadError;
    `);
    // The documented surface beyond the session: the gate, its outcome, the error family and its codes.
    writeFileSync(join(consumer, 'consumer-gate.ts'), `
      import { gate, selectGpus, inspectHolders, GpugateError, ErrorCode, parseSize, type GateOutcome, type SelectResult } from 'gpugate';
      export async function gated(): Promise<string> {
        const outcome: GateOutcome = await gate({ mode: 'check', minFree: { bytes: parseSize('2GiB') } });
        return outcome.result;
      }
      export const pick = (): Promise<SelectResult> => selectGpus({ count: 1 });
      export const holders = inspectHolders;
      export const isTimeout = (e: unknown): boolean => e instanceof GpugateError && e.code === ErrorCode.waitTimeout;
    `);
    writeFileSync(join(consumer, 'consumer-esm.mts'), `
      import { openNvml, type GpuDevice } from 'gpugate';
      export const open: typeof openNvml = openNvml;
      // A GPU NVML cannot identify (lost) has a null name: the type says so, and a consumer must handle it.
      export const names = (devices: GpuDevice[]): string[] => devices.map((d) => d.name ?? 'unknown');
    `);
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        module: 'node16', moduleResolution: 'node16', target: 'ES2022', strict: true, noEmit: true,
        exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true,
        typeRoots: [join(repoRoot, 'node_modules', '@types')], types: ['node'],
      },
      files: ['consumer.ts', 'consumer-gate.ts', 'consumer-esm.mts'],
    }));
    const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = inConsumer('node', [tsc, '-p', 'tsconfig.json']);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  }, 180000);

  it('names its repository, homepage and issue tracker, and ships the docs README.md links to, every link resolving inside the package', () => {
    const pkgDir = join(consumer, 'node_modules', 'gpugate');
    const manifest = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { repository?: { url?: string }; homepage?: string; bugs?: { url?: string } };
    expect(manifest.repository?.url).toMatch(/^git\+https:\/\/github\.com\/gpugate\/gpugate\.git$/);
    expect(manifest.homepage).toMatch(/^https:\/\/github\.com\/gpugate\/gpugate/);
    expect(manifest.bugs?.url).toBe('https://github.com/gpugate/gpugate/issues');
    const files = listTarball(prepared.tarball);
    for (const page of ['docs/cli.md', 'docs/install.md', 'docs/systemd.md']) expect(files).toContain(page);
    expect(checkDocLinks(files, (file) => readFileSync(join(pkgDir, file), 'utf8'))).toEqual([]);
  });

  it('ships the JSON Schemas, reachable as gpugate/schemas/*.schema.json', () => {
    const r = inConsumer('node', ['-e', `
      const schema = require('gpugate/schemas/status.schema.json');
      console.log(JSON.stringify({ id: schema.$id, path: require.resolve('gpugate/schemas/gate.schema.json') }));`]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { id: string; path: string };
    expect(out.id).toBe('urn:gpugate:schema:status');
    expect(out.path).toMatch(/node_modules\/gpugate\/schemas\/gate\.schema\.json$/);
  });

  it('runs `npx gpugate status --json` against the bundled simulator', () => {
    const pkgDir = join(consumer, 'node_modules', 'gpugate');
    const scenarioPath = join(pkgDir, 'scenarios', SCENARIO_NAME);
    const scenario = JSON.parse(readFileSync(scenarioPath, 'utf8')) as { devices: { uuid: string }[] };
    const r = inConsumer('npx', ['--no-install', 'gpugate', 'status', '--json'], {
      GPUGATE_NVML_LIBRARY: join(pkgDir, 'prebuilds', 'linux-x64', 'gpugate_sim.so'),
      GPUGATE_SIM_SCENARIO: scenarioPath,
    });
    expect(r.status, `gpugate status failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
    const json = JSON.parse(r.stdout) as unknown;
    const text = JSON.stringify(json);
    for (const d of scenario.devices) expect(text).toContain(d.uuid);
  }, 120000);

  it('installs the command as the bundle the pack built, compiled with its code cache (the same Node packed it)', () => {
    const cliDir = join(consumer, 'node_modules', 'gpugate', 'dist', 'cli');
    const { compileBundle } = createRequire(join(cliDir, 'main.js'))('./code-cache.js') as typeof import('../../src/cli/code-cache');
    expect(compileBundle(cliDir).cache).toBe('used');
  });

  it('runs `npx gpugate demo` successfully', () => {
    const r = inConsumer('npx', ['--no-install', 'gpugate', 'demo']);
    expect(r.status, `gpugate demo failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout.length + r.stderr.length).toBeGreaterThan(0);
  }, 180000);

  it('leaves no compiler-built file anywhere in the installed package', () => {
    const pkgDir = join(consumer, 'node_modules', 'gpugate');
    const walk = (d: string): string[] =>
      readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));
    expect(walk(pkgDir).filter((f) => /\.(o|mk)$|Makefile$/.test(f))).toEqual([]);
  });
});
