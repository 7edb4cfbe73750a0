/**
 * scripts/gpu-validate.sh in --simulate mode: the real script, run as a subprocess against the
 * built CLI (dist/cli/main.js), gpugate's NVML simulator, the stand-in nvidia-smi and a real
 * holder process. Pins that a healthy run passes every step with the right figures, that a
 * disagreeing nvidia-smi fails the run loudly, that bad arguments are usage errors, and that the
 * script never asks nvidia-smi to change a GPU setting.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIB, type StepRecord } from '../helpers/gpu-validate-step';

const repo = resolve(__dirname, '..', '..');
const script = join(repo, 'scripts', 'gpu-validate.sh');
const helpers = join(repo, 'scripts', 'gpu-validate');

interface Report {
  result: 'pass' | 'fail';
  mode: string;
  driverVersion: string | null;
  gpus: Array<{ index: number; uuid: string; totalBytes: number }>;
  steps: StepRecord[];
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let work: string;
let standin: string;

/** The pynvml subset pynvml-query.py uses, over ctypes, as nvidia-ml-py implements it. */
const PYNVML_STAND_IN = `
import ctypes

class NVMLError(Exception):
    def __init__(self, code):
        super().__init__(f"NVML error {code}")
        self.value = code

class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

class _MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

class _Pci(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]

nvmlMemory_v2 = ctypes.sizeof(_MemoryV2) | (2 << 24)
_lib = None

def _check(code):
    if code != 0:
        raise NVMLError(code)

def nvmlInit():
    global _lib
    _lib = ctypes.CDLL("libnvidia-ml.so.1")
    _check(_lib.nvmlInitWithFlags(0))

def nvmlShutdown():
    _check(_lib.nvmlShutdown())

def _string(fn, *args):
    buf = ctypes.create_string_buffer(96)
    _check(getattr(_lib, fn)(*args, buf, ctypes.c_uint(96)))
    return buf.value.decode()

def nvmlSystemGetDriverVersion():
    return _string("nvmlSystemGetDriverVersion")

def nvmlDeviceGetCount():
    count = ctypes.c_uint()
    _check(_lib.nvmlDeviceGetCount_v2(ctypes.byref(count)))
    return count.value

def nvmlDeviceGetHandleByIndex(index):
    handle = ctypes.c_void_p()
    _check(_lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)))
    return handle

def nvmlDeviceGetUUID(handle):
    return _string("nvmlDeviceGetUUID", handle)

def nvmlDeviceGetName(handle):
    return _string("nvmlDeviceGetName", handle)

def nvmlDeviceGetPciInfo(handle):
    pci = _Pci()
    _check(_lib.nvmlDeviceGetPciInfo_v3(handle, ctypes.byref(pci)))
    return pci

def nvmlDeviceGetMemoryInfo(handle, version=None):
    if not version:
        memory = _Memory()
        _check(_lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)))
    else:
        memory = _MemoryV2(version=version)
        _check(_lib.nvmlDeviceGetMemoryInfo_v2(handle, ctypes.byref(memory)))
    return memory
`;

beforeAll(() => {
  for (const built of ['dist/cli/main.js', 'build/Release/gpugate_sim.so']) {
    if (!existsSync(join(repo, built))) {
      throw new Error(`gpu-validate tests need ${built}: build the project first (npm run build)`);
    }
  }
  work = mkdtempSync(join(tmpdir(), 'gpu-validate-test-'));
  // The stand-in nvidia-smi, compiled from its one source as gpu-validate.sh --simulate does.
  standin = join(work, 'standin', 'nvidia-smi');
  spawnSync('mkdir', ['-p', join(work, 'standin')]);
  const cc = spawnSync('cc', ['-O2', '-I', join(repo, 'native'), '-o', standin, join(helpers, 'nvidia-smi-standin.c'), '-ldl'], { encoding: 'utf8' });
  if (cc.status !== 0) throw new Error(`compiling the stand-in nvidia-smi failed: ${cc.stderr}`);
});

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

/** Runs the script to completion (bounded well under the test timeout). */
function runScript(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((done, reject) => {
    const child = spawn('bash', [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

function step(report: Report, name: string): StepRecord {
  const found = report.steps.find((s) => s.step === name);
  if (found === undefined) throw new Error(`report has no "${name}" step: ${JSON.stringify(report.steps.map((s) => s.step))}`);
  return found;
}

/** Whether pid is a live process (a zombie waiting for a reaper counts as gone). */
function alive(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

describe('gpu-validate.sh --simulate', () => {
  it('passes identity, processes and the restart race against the simulator, and writes the report', async () => {
    const reportPath = join(work, 'ok', 'report.json');
    const run = await runScript(['--simulate', '--report', reportPath]);
    expect(run.code, `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`).toBe(0);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
    expect(report.result).toBe('pass');
    expect(report.mode).toBe('simulate');
    expect(report.driverVersion).toBe('580.95.05');
    expect(report.gpus.map((g) => g.uuid)).toEqual(['GPU-6a1c27e0-5b0f-4d8e-9c43-0f2d7e1b8a01', 'GPU-b24f9d13-7e6a-4c21-8f05-93d1c6a4e702']);
    expect(report.gpus[0]?.totalBytes).toBe(97887 * MIB);

    const identity = step(report, 'identity');
    expect(identity.status).toBe('pass');
    expect(identity.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['nvidia-smi: GPU 1 uuid', 'nvidia-smi: GPU 1 total', 'nvidia-smi: GPU 1 used']));

    const processes = step(report, 'processes');
    expect(processes.status).toBe('pass');
    // By default the holder takes a fifth of the GPU, so that --min-free 0.9 cannot be met while it runs.
    const held = Math.floor(97887 / 5) * MIB;
    expect(processes.data).toMatchObject({ holdBytes: held, nvidiaSmiUsedBytes: held, gpugate: { class: 'active', usedBytes: held } });

    const race = step(report, 'race');
    expect(race.status, race.summary).toBe('pass');
    const data = race.data as { exitCode: number; states: string[]; releaseMs: number; gpugateReturnedAfterKillMs: number; pid: number };
    expect(data.exitCode).toBe(0);
    expect(data.states[0]).toBe('active');
    expect(data.states[data.states.length - 1]).toBe('free');
    // The simulated driver releases the memory 1.5 s after the kill; gpugate returns after that.
    // With nothing left to free (no holder, no memory in use) it does not sit out the 2 s
    // stability window: one quiet poll after the release is enough.
    expect(data.releaseMs).toBeGreaterThanOrEqual(1500);
    expect(data.gpugateReturnedAfterKillMs).toBeGreaterThanOrEqual(1500);
    expect(alive(data.pid)).toBe(false);

    // gpugate bench, with the stand-in nvidia-smi first on its PATH.
    const latency = step(report, 'latency');
    expect(latency.status, latency.summary).toBe('pass');
    expect(latency.data).toMatchObject({ devices: 2, gpugateMedianMs: expect.any(Number), nvidiaSmiMedianMs: expect.any(Number), ratio: expect.any(Number) });
    expect(latency.summary).toMatch(/^gpugate median .+; nvidia-smi median .+: gpugate \d+x faster/);
    // What the NVML helper adds to opening NVML, this checkout loaded as the package (its own test: open-cost.test.ts).
    const openCost = step(report, 'open-cost');
    expect(openCost.status, openCost.summary).toBe('pass');
    expect(openCost.data).toMatchObject({ goalMs: 5, firstOpen: { pairs: expect.any(Number), addedMedianMs: expect.any(Number) }, repeatedOpen: { opens: 10, addedMs: expect.any(Number) } });
    // gpugate doctor: whatever this host makes it conclude is recorded; every GPU's health was read.
    const doctor = step(report, 'doctor');
    expect(doctor.status, doctor.summary).toBe('pass');
    const doctorData = doctor.data as { exitCode: number; gpuCount: number; health: Array<{ index: number; read: string[]; nvmlCodes: Record<string, string> }> };
    expect([0, 69, 75]).toContain(doctorData.exitCode);
    expect(doctorData.gpuCount).toBe(2);
    for (const gpu of doctorData.health) {
      expect(gpu.read).toEqual(expect.arrayContaining(['gpu.mig-mode', 'gpu.remapped-rows', 'gpu.ecc-errors', 'gpu.clock-events', 'gpu.pcie-link']));
      expect(gpu.nvmlCodes).toEqual({ 'gpu.retired-pages': 'NVML_ERROR_NOT_SUPPORTED', 'gpu.fabric': 'NVML_ERROR_NOT_SUPPORTED' });
    }
    expect(doctor.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['gpugate doctor --json matches schemas/doctor.schema.json', 'doctor sees the GPUs gpugate status lists']));
    // gpugate select, without a lease and then leasing under the run's temp dir (gone with it, checked below).
    const select = step(report, 'select');
    expect(select.status, select.summary).toBe('pass');
    expect(select.data).toMatchObject({ exitCode: 0, chosen: [{ uuid: report.gpus[0]?.uuid, lease: null }] });
    const selectLease = step(report, 'select-lease');
    expect(selectLease.status, selectLease.summary).toBe('pass');
    const lease = (selectLease.data as { chosen: Array<{ lease: { path: string; holderComm: string } }> }).chosen[0]?.lease;
    expect(lease?.path).toMatch(/\/gpu-validate\.[^/]+\/scratch\/leases\/GPU-6a1c27e0-5b0f-4d8e-9c43-0f2d7e1b8a01\.lease$/);
    expect(lease?.holderComm).toBe('bash');
    expect(existsSync(lease?.path ?? '')).toBe(false);
    // What the library does where the simulator imitates a driver: here the simulator itself, so it agrees.
    const abi = step(report, 'driver-abi');
    expect(abi.status, abi.summary).toBe('pass');
    expect(abi.checks.map((c) => `${c.name}:${c.ok}`)).toEqual(['profile exports:true', 'CUDA version:true', 'NVML version:true']);
    expect(abi.data).toMatchObject({ driverVersion: '580.95.05', profile: 'current', beyondProfile: [] });
    // What the driver does where gpugate's facts are unverified, read through ctypes: the simulator's current semantics, as gpugate read them.
    const driver = step(report, 'driver');
    expect(driver.status, driver.summary).toBe('pass');
    expect(driver.summary).toBe('driver 580.95.05: v2 used-excludes-reserved; 2 GPU(s) read');
    expect(driver.checks.find((c) => c.name === 'GPU 0 gpugate reads the same semantics')?.ok).toBe(true);
    expect(report.steps.map((s) => s.step)).toEqual(['identity', 'processes', 'race', 'latency', 'open-cost', 'doctor', 'select', 'select-lease', 'driver', 'driver-abi']);
    expect(run.stdout).toMatch(/identity\s+PASS/);
    expect(run.stdout).toMatch(/race\s+PASS\s+exit 0/);
    expect(run.stdout).toMatch(/doctor\s+PASS\s+exit (0|69|75) /);
    expect(run.stdout).toContain(`report: ${reportPath}`);
    // The scenario, logs and scratch files are gone; only the report the caller asked for is left.
    expect(readdirSync(join(work, 'ok'))).toEqual(['report.json']);
  }, 160_000);

  it('fails loudly when nvidia-smi reports a different UUID', async () => {
    const bin = join(work, 'bad-smi');
    rmSync(bin, { recursive: true, force: true });
    spawnSync('mkdir', ['-p', bin]);
    const wrapper = join(bin, 'nvidia-smi');
    writeFileSync(wrapper, `#!/bin/sh\n"${standin}" "$@" | sed 's/GPU-b24f9d13-7e6a-4c21-8f05-93d1c6a4e702/GPU-00000000-0000-0000-0000-000000000bad/'\n`);
    chmodSync(wrapper, 0o755);
    const reportPath = join(bin, 'report.json');
    const run = await runScript(['--simulate', '--nvidia-smi', wrapper, '--report', reportPath, '--skip', 'processes,race,latency,open-cost,doctor,select']);
    expect(run.code).toBe(1);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
    expect(report.result).toBe('fail');
    // The driver step reads NVML directly: it does not depend on nvidia-smi agreeing.
    expect(report.steps.map((s) => `${s.step}:${s.status}`)).toEqual(['identity:fail', 'processes:skip', 'race:skip', 'latency:skip', 'open-cost:skip', 'doctor:skip', 'select:skip', 'select-lease:skip', 'driver:pass', 'driver-abi:pass']);
    expect(step(report, 'race').summary).toBe('skipped: --skip race');
    expect(step(report, 'select-lease').summary).toBe('skipped: --skip select');
    expect((report as Report & { settings: unknown }).settings).toEqual({ gpu: 0, holdMib: '20% of total', toleranceMib: 4, usedToleranceMib: 64, skip: ['processes', 'race', 'latency', 'open-cost', 'doctor', 'select'] });
    const identity = step(report, 'identity');
    expect(identity.status).toBe('fail');
    const failed = identity.checks.filter((c) => !c.ok);
    expect(failed.map((c) => c.name)).toEqual(['nvidia-smi: GPU 1 uuid']);
    expect(failed[0]?.detail).toContain('GPU-00000000-0000-0000-0000-000000000bad');
    expect(run.stdout).toMatch(/FAIL nvidia-smi: GPU 1 uuid/);
    expect(run.stdout).toMatch(/identity\s+FAIL/);
    expect(run.stdout).toContain('result: FAIL (identity failed)');
  }, 160_000);

  it('skips the race, saying why, when the holder is too small to make --min-free 0.9 fail', async () => {
    const reportPath = join(work, 'small-holder', 'report.json');
    // Also the --package form: an installed package directory (here this checkout).
    const run = await runScript(['--simulate', '--package', repo, '--hold-mib', '2048', '--skip', 'latency,open-cost', '--report', reportPath]);
    expect(run.code, run.stdout).toBe(0);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report & { gpugate: { command: string; version: string } };
    expect(report.gpugate.command.endsWith(` ${join(repo, 'dist', 'cli', 'main.js')}`)).toBe(true);
    expect(report.gpugate.version).toMatch(/^gpugate \d+\.\d+\.\d+/);
    expect(step(report, 'processes').status).toBe('pass');
    expect(step(report, 'race').summary).toBe(
      'skipped: the holder\'s 2048 MiB leave at least 90% of GPU 0 free, so --min-free 0.9 is met while it runs: use --hold-mib above 9308',
    );
  }, 60_000);

  it('compares pynvml too when it is importable, reading the simulator as libnvidia-ml.so.1', async () => {
    // A minimal pynvml with the real module's calling conventions (str results, NVMLError,
    // nvmlDeviceGetMemoryInfo(handle, version=nvmlMemory_v2)), loading libnvidia-ml.so.1 by name
    // as the real one does: the script must make that name resolve to the simulator.
    const site = join(work, 'pynvml-site');
    spawnSync('mkdir', ['-p', site]);
    writeFileSync(join(site, 'pynvml.py'), PYNVML_STAND_IN);
    const reportPath = join(work, 'pynvml', 'report.json');
    const run = await runScript(['--simulate', '--skip', 'processes,race,latency,open-cost', '--report', reportPath], { PYTHONPATH: site });
    expect(run.code, run.stdout).toBe(0);
    const identity = step(JSON.parse(readFileSync(reportPath, 'utf8')) as Report, 'identity');
    expect(identity.status).toBe('pass');
    expect(identity.summary).toContain('match nvidia-smi and pynvml');
    expect(identity.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['pynvml: GPU count', 'pynvml: GPU 1 total', 'pynvml: GPU 1 used', 'pynvml: driver version']));
  }, 60_000);

  it('fails the run when --gpu names a GPU that does not exist', async () => {
    const reportPath = join(work, 'no-gpu', 'report.json');
    const run = await runScript(['--simulate', '--gpu', '7', '--report', reportPath]);
    expect(run.code).toBe(1);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
    expect(step(report, 'gpu-selection').summary).toContain('--gpu 7');
    expect(step(report, 'processes').status).toBe('skip');
  }, 60_000);

  it('rejects bad arguments with exit 64, naming the argument and what was expected', async () => {
    const unknown = await runScript(['--simulate', '--frobnicate']);
    expect(unknown.code).toBe(64);
    expect(unknown.stderr).toContain("unknown argument '--frobnicate'");
    const notNumber = await runScript(['--simulate', '--gpu', 'first']);
    expect(notNumber.code).toBe(64);
    expect(notNumber.stderr).toContain("--gpu 'first': expected a non-negative integer");
    const twoSources = await runScript(['--package', '.', '--gpugate', 'gpugate']);
    expect(twoSources.code).toBe(64);
    expect(twoSources.stderr).toContain('exclude each other');
    const badSkip = await runScript(['--simulate', '--skip', 'identity']);
    expect(badSkip.code).toBe(64);
    expect(badSkip.stderr).toContain("--skip identity: 'identity' is not a step that can be skipped");
  });
});

describe('gpu-validate.sh without a GPU or a driver', () => {
  it('refuses a real run when there is no nvidia-smi, saying what is missing', async () => {
    const bin = join(work, 'path-without-nvidia-smi');
    spawnSync('mkdir', ['-p', bin]);
    const scratch = join(work, 'no-smi-tmp');
    spawnSync('mkdir', ['-p', scratch]);
    const run = await runScript(['--gpugate', join(repo, 'dist', 'cli', 'main.js')], { PATH: `${bin}:/usr/bin:/bin`, TMPDIR: scratch });
    expect(run.code).toBe(69);
    expect(readdirSync(scratch)).toEqual([]);
    expect(run.stderr).toContain('no nvidia-smi on PATH: is the NVIDIA driver installed?');
  });

  it('fails the identity step when gpugate cannot load NVML, with gpugate\'s own reason', async () => {
    const reportPath = join(work, 'no-driver', 'report.json');
    const run = await runScript(['--gpugate', join(repo, 'dist', 'cli', 'main.js'), '--nvidia-smi', standin, '--report', reportPath], {
      GPUGATE_NVML_LIBRARY: join(work, 'no-such-libnvidia-ml.so.1'),
    });
    expect(run.code).toBe(1);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
    expect(report.mode).toBe('real');
    const identity = step(report, 'identity');
    expect(identity.status).toBe('fail');
    expect(identity.summary).toMatch(/^gpugate status --json exited 69: .*no-such-libnvidia-ml/);
    expect(step(report, 'race').status).toBe('skip');
    // doctor and select still run: NVML failing to open is their recorded result, not a crash.
    const doctor = step(report, 'doctor');
    expect(doctor.status, doctor.summary).toBe('pass');
    expect(doctor.data).toMatchObject({ exitCode: 69, gpuCount: 0, findings: expect.arrayContaining([expect.objectContaining({ id: 'driver.nvml', status: 'fail' })]) });
    expect(step(report, 'select').data).toMatchObject({ exitCode: 69, result: 'unavailable' });
    expect(step(report, 'select').status).toBe('pass');
  }, 60_000);

  it('skips the process and race steps of a real run, saying why, when no CUDA context can be started', async (context) => {
    // The real-mode path on the simulator: gpugate and the stand-in nvidia-smi read it, but the
    // holder must come from torch, cupy or nvcc, and this PATH offers none that can hold memory.
    const path = '/usr/bin:/bin';
    if (spawnSync('sh', ['-c', 'command -v nvcc'], { env: { PATH: path } }).status === 0) {
      context.skip('nvcc is on /usr/bin:/bin here: the fallback to nvcc would run instead');
    }
    const dir = join(work, 'real-no-cuda');
    spawnSync('mkdir', ['-p', dir]);
    const scenario = join(dir, 'scenario.json');
    expect(spawnSync(process.execPath, [join(helpers, 'sim-scenario.cjs'), 'write-base', scenario]).status).toBe(0);
    const reportPath = join(dir, 'report.json');
    const run = await runScript(
      ['--gpugate', join(repo, 'dist', 'cli', 'main.js'), '--node', process.execPath, '--nvidia-smi', standin, '--skip', 'latency,open-cost', '--report', reportPath],
      { PATH: path, GPUGATE_NVML_LIBRARY: join(repo, 'build', 'Release', 'gpugate_sim.so'), GPUGATE_SIM_SCENARIO: scenario },
    );
    expect(run.code, run.stdout).toBe(0);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
    expect(report.mode).toBe('real');
    expect(step(report, 'identity').status).toBe('pass');
    const processes = step(report, 'processes');
    expect(processes.status).toBe('skip');
    expect(processes.summary).toMatch(/^skipped: no way to start a CUDA context: python \(exit 3\): .+; no nvcc$/);
    expect(step(report, 'race').summary).toBe('skipped: no holder is running (see the processes step)');
    expect(step(report, 'doctor').status).toBe('pass');
    expect(step(report, 'select').status).toBe('pass');
    expect(step(report, 'select-lease').status).toBe('pass');
  }, 90_000);

  it('skips doctor and select, saying why, for a gpugate that has no such commands', async () => {
    // An older gpugate: the built CLI behind a wrapper that knows neither command, as such a version answers.
    const dir = join(work, 'older-gpugate');
    spawnSync('mkdir', ['-p', dir]);
    const wrapper = join(dir, 'gpugate');
    writeFileSync(wrapper, `#!/bin/sh\ncase "$1" in doctor|select) echo "gpugate: unknown command '$1'" >&2; exit 64 ;; esac\nexec "${process.execPath}" "${join(repo, 'dist', 'cli', 'main.js')}" "$@"\n`);
    chmodSync(wrapper, 0o755);
    const scenario = join(dir, 'scenario.json');
    expect(spawnSync(process.execPath, [join(helpers, 'sim-scenario.cjs'), 'write-base', scenario]).status).toBe(0);
    const reportPath = join(dir, 'report.json');
    const run = await runScript(['--gpugate', wrapper, '--nvidia-smi', standin, '--skip', 'processes,race,latency', '--report', reportPath],
      { GPUGATE_NVML_LIBRARY: join(repo, 'build', 'Release', 'gpugate_sim.so'), GPUGATE_SIM_SCENARIO: scenario });
    expect(run.code, run.stdout).toBe(0);
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
    expect(step(report, 'doctor').summary).toBe("skipped: gpugate doctor unavailable (gpugate: unknown command 'doctor')");
    // A command that is not an installed package's main.js: no library to load for the probes.
    expect(step(report, 'open-cost').summary).toBe('skipped: no gpugate package to load the library from (pass --tarball or --package)');
    expect(step(report, 'select').summary).toBe("skipped: gpugate select unavailable (gpugate: unknown command 'select')");
    expect(step(report, 'select-lease').status).toBe('skip');
  }, 60_000);

  it('leaves no holder process behind when it is stopped in the middle of a run', async () => {
    const scratch = join(work, 'stopped-tmp');
    spawnSync('mkdir', ['-p', scratch]);
    const child = spawn('bash', [script, '--simulate', '--hold-mib', '1024'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: scratch } });
    let stdout = '';
    const holderPid = await new Promise<number>((found, reject) => {
      const timer = setTimeout(() => reject(new Error(`no holder started:\n${stdout}`)), 60_000);
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        const match = /holder: .*, pid (\d+),/.exec(stdout);
        if (match !== null) {
          clearTimeout(timer);
          found(Number(match[1]));
        }
      });
    });
    expect(alive(holderPid)).toBe(true);
    const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(143);
    // The holder is killed by the script's cleanup; give the kernel a moment to reap it.
    for (let i = 0; i < 50 && alive(holderPid); i += 1) await new Promise((r) => setTimeout(r, 100));
    expect(alive(holderPid)).toBe(false);
    // No report was written, so nothing of the run is left in its temp dir.
    expect(readdirSync(scratch)).toEqual([]);
  }, 90_000);
});

describe('gpu-validate.sh holders on a host without a GPU', () => {
  it('the Python helpers compile', () => {
    for (const file of ['holder.py', 'pynvml-query.py']) {
      const result = spawnSync('python3', ['-c', 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])', join(helpers, file)], { encoding: 'utf8' });
      expect(result.status, result.stderr).toBe(0);
    }
  });

  it('the nvcc holder builds, and without a driver exits 3 with CUDA\'s reason', (context) => {
    if (spawnSync('nvcc', ['--version']).error !== undefined) {
      console.warn('gpu-validate: nvcc holder test skipped: no nvcc on PATH');
      context.skip('no nvcc on PATH');
    }
    const binary = join(work, 'holder');
    const build = spawnSync('nvcc', ['-O2', '-o', binary, join(helpers, 'holder.cu')], { encoding: 'utf8', timeout: 120_000 });
    expect(build.status, build.stderr).toBe(0);
    const run = spawnSync(binary, ['16', '1'], { encoding: 'utf8', timeout: 30_000 });
    if (run.status === 0) {
      // A machine with a GPU: the holder held the memory and said so.
      expect(run.stdout).toMatch(/^READY \d+ 16777216 nvcc$/m);
    } else {
      expect(run.status).toBe(3);
      expect(run.stderr).toMatch(/^CUDA could not hold 16 MiB: .+/);
    }
  }, 150_000);
});

describe('gpu-validate.sh is read-only towards the GPU', () => {
  const sources = [script, ...readdirSync(helpers).map((f) => join(helpers, f))];

  it('never passes nvidia-smi an option that changes or resets a GPU', () => {
    // Persistence, reset, compute mode, MIG, power limit, clocks, ECC, accounting, driver model.
    const forbidden = /(^|[\s"'=])(-pm|-r|-c|-mig|-pl|-lgc|-rgc|-lmc|-rmc|-ac|-rac|-acp|-e|-am|-caa|-dm|-fdm|--persistence-mode|--gpu-reset|--compute-mode|--multi-instance-gpu|--power-limit|--lock-gpu-clocks|--reset-gpu-clocks|--lock-memory-clocks|--applications-clocks|--ecc-config|--accounting-mode|--driver-model)(?=$|[\s"'=])/;
    let invocations = 0;
    for (const file of sources) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        // Every line that names nvidia-smi or the script's wrapper for it (nvsmi, $NVSMI).
        if (!/nvidia-smi|nvsmi|NVSMI/.test(line)) return;
        invocations += 1;
        expect(forbidden.test(line), `${file}:${i + 1}: ${line}`).toBe(false);
      });
    }
    expect(invocations).toBeGreaterThan(10);
  });

  it('asks nvidia-smi only --query-* questions', () => {
    const text = readFileSync(script, 'utf8');
    const calls = text.split('\n').filter((line) => /^\s*(nvsmi|"\$NVSMI")\s/.test(line));
    expect(calls.length).toBeGreaterThanOrEqual(4);
    for (const call of calls) expect(call).toMatch(/--query-(gpu|compute-apps)=/);
  });

  it('is shellcheck-clean', (context) => {
    const probe = spawnSync('shellcheck', ['--version']);
    if (probe.error !== undefined) {
      console.warn('gpu-validate: shellcheck test skipped: shellcheck is not installed (apt-get install -y shellcheck)');
      context.skip('shellcheck is not installed (apt-get install -y shellcheck)');
    }
    const result = spawnSync('shellcheck', [script], { encoding: 'utf8' });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});
