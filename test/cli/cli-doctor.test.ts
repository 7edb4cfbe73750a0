/**
 * `gpugate doctor` as a subprocess on simulated hosts: each check's status and the exit code, for
 * a healthy host, a pending MIG change, failed row remapping, persistence off, Xid messages in a
 * kernel log the test writes, a library/kernel-module mismatch (nvmlInit refused, and versions
 * that differ), the 535.43-535.86 branch, missing device nodes, CUDA ordinals on a mixed host,
 * a nested PID namespace (a real one, from unshare), and a real nvidia-persistenced process.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath, parseJsonOutput, runCli, type CliRun } from '../helpers/cli';
import { until } from '../helpers/processes';
import { bundledScenario, simDevice, simLibraryFor, testTempDir, writeScenario } from '../helpers/sim';

interface Check { id: string; subject: string; status: 'pass' | 'warn' | 'fail'; summary: string; evidence: Record<string, unknown>; advice?: string }
interface Document { result: string; exitCode: number; gpuCount: number; checks: Check[]; library: unknown }

const work = fs.mkdtempSync(path.join(testTempDir(), 'doctor-'));
const devDir = path.join(work, 'dev');
const versionFile = path.join(work, 'version');
const emptyLog = path.join(work, 'empty.log');
const MODULE_LINE = 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-A24-23-2)  Thu Sep 18 21:07:20 UTC 2025\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n';

/** The real initial PID namespace: the healthy-host expectations hold only there. */
const inInitialPidNamespace = fs.readlinkSync('/proc/self/ns/pid') === 'pid:[4026531836]';
if (!inInitialPidNamespace) console.warn('cli-doctor: the test runs in a nested PID namespace; the host-namespace expectations are skipped');

let persistenced: ChildProcess | null = null;

beforeAll(async () => {
  fs.mkdirSync(devDir);
  for (const name of ['nvidiactl', 'nvidia-uvm', ...Array.from({ length: 8 }, (_, i) => `nvidia${i}`)]) fs.writeFileSync(path.join(devDir, name), '');
  fs.writeFileSync(versionFile, MODULE_LINE);
  fs.writeFileSync(emptyLog, '');
  // A real process named as the daemon is (its comm cut to 15 characters, its argv[0] whole).
  const binary = path.join(work, 'nvidia-persistenced');
  fs.copyFileSync('/bin/sleep', binary);
  fs.chmodSync(binary, 0o755);
  persistenced = spawn(binary, ['600'], { stdio: 'ignore' });
  const pid = persistenced.pid as number;
  await until('the stand-in nvidia-persistenced to run', () => {
    try {
      return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'nvidia-persiste';
    } catch {
      return false;
    }
  });
});

afterAll(() => {
  persistenced?.kill('SIGKILL');
  fs.rmSync(work, { recursive: true, force: true });
});

/** Environment: the scenario through its profile's simulator, the prepared device nodes and module version. */
function env(scenario: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return cliEnv(scenario, { GPUGATE_NVML_LIBRARY: simLibraryFor(scenario), GPUGATE_DEV_DIR: devDir, GPUGATE_DRIVER_VERSION_FILE: versionFile, ...extra });
}

async function doctor(scenario: string, options: { args?: string[]; env?: NodeJS.ProcessEnv; kernelLog?: string } = {}): Promise<{ run: CliRun; document: Document }> {
  const run = await runCli(['doctor', '--json', '--kernel-log', options.kernelLog ?? emptyLog, ...(options.args ?? [])], { env: options.env ?? env(scenario), killAfterMs: 60_000 });
  const document = parseJsonOutput(run) as unknown as Document;
  expect(run.code, run.stderr).toBe(document.exitCode);
  return { run, document };
}

function checkOf(document: Document, id: string, subjectPrefix?: string): Check {
  const found = document.checks.find((c) => c.id === id && (subjectPrefix === undefined || c.subject.startsWith(subjectPrefix)));
  if (found === undefined) throw new Error(`no check ${id}${subjectPrefix === undefined ? '' : ` for ${subjectPrefix}`} in ${document.checks.map((c) => `${c.subject}:${c.id}`).join(', ')}`);
  return found;
}

function notPassing(document: Document): string[] {
  return document.checks.filter((c) => c.status !== 'pass').map((c) => `${c.subject}: ${c.id} ${c.status}`);
}

function kernelLog(lines: string[]): string {
  const file = path.join(work, `kernel-${lines.length}-${Math.random().toString(16).slice(2)}.log`);
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

describe.skipIf(!inInitialPidNamespace)('gpugate doctor on a simulated host', () => {
  it('passes every check on the healthy 8-GPU host and exits 0', async () => {
    const { document } = await doctor(bundledScenario('idle-8x-rtx-pro-6000'));
    expect(notPassing(document)).toEqual([]);
    expect(document).toMatchObject({ result: 'pass', exitCode: 0, gpuCount: 8 });
    const gpuIds = document.checks.filter((c) => c.subject.startsWith('GPU 3 ')).map((c) => c.id);
    expect(gpuIds).toEqual(['gpu.reachable', 'gpu.recovery-action', 'gpu.persistence-mode', 'gpu.compute-mode', 'gpu.mig-mode', 'gpu.remapped-rows', 'gpu.ecc-errors',
      'gpu.retired-pages', 'gpu.clock-events', 'gpu.pcie-link', 'gpu.fabric']);
    expect(checkOf(document, 'driver.version-match').evidence).toMatchObject({ libraryVersion: '580.95.05', kernelModuleVersion: '580.95.05' });
    expect(checkOf(document, 'host.persistenced').evidence['pids']).toEqual([persistenced?.pid]);
    expect(checkOf(document, 'kernel.xid').summary).toContain('no NVRM Xid messages');
    // Retired pages: an RTX PRO 6000 remaps rows instead, so the query is not supported (a pass).
    expect(checkOf(document, 'gpu.retired-pages', 'GPU 0 ').summary).toContain('not supported');
  });

  it('warns about a pending MIG change (exit 75)', async () => {
    const { document } = await doctor(bundledScenario('mig'));
    expect(notPassing(document)).toEqual([`GPU 1 (GPU-8d2e61b0-4c3a-4f9e-b7d5-1a6c9e0f3b28): gpu.mig-mode warn`]);
    const mig = checkOf(document, 'gpu.mig-mode', 'GPU 1 ');
    expect(mig.evidence).toEqual({ current: false, pending: true });
    expect(mig.advice).toMatch(/reset/);
    expect(checkOf(document, 'gpu.mig-mode', 'GPU 0 ').status).toBe('pass');
    expect(document.exitCode).toBe(75);
  });

  it('fails on failed row remapping and uncorrectable ECC errors, warns on a pending remap (exit 69)', async () => {
    const scenario = writeScenario({ devices: [
      simDevice(0, { remappedRows: { correctable: 1, uncorrectable: 0, pending: true, failureOccurred: false } }),
      simDevice(1, { remappedRows: { uncorrectable: 9, failureOccurred: true }, eccErrors: { uncorrected: 2 } }),
    ] });
    const { document } = await doctor(scenario);
    expect(notPassing(document).sort()).toEqual([
      'GPU 0 (GPU-7e570000-0000-4000-8000-000000000000): gpu.remapped-rows warn',
      'GPU 1 (GPU-7e570000-0000-4000-8000-000000000001): gpu.ecc-errors fail',
      'GPU 1 (GPU-7e570000-0000-4000-8000-000000000001): gpu.remapped-rows fail',
    ]);
    expect(checkOf(document, 'gpu.remapped-rows', 'GPU 1 ').evidence).toEqual({ correctable: 0, uncorrectable: 9, pending: false, failureOccurred: true });
    expect(document).toMatchObject({ result: 'fail', exitCode: 69 });
  });

  it('fails a GPU whose driver names a recovery action (which DCGM reports healthy), naming the action and what to do (exit 69)', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1, { recoveryAction: 'drain-and-reset' }), simDevice(2, { recoveryAction: null })] });
    const { document } = await doctor(scenario);
    expect(notPassing(document)).toEqual(['GPU 1 (GPU-7e570000-0000-4000-8000-000000000001): gpu.recovery-action fail']);
    const failed = checkOf(document, 'gpu.recovery-action', 'GPU 1 ');
    expect(failed.evidence).toEqual({ recoveryAction: 'drain-and-reset' });
    expect(failed.summary).toContain('needs recovery action drain-and-reset');
    expect(failed.advice).toMatch(/drain its work, then reset it \(nvidia-smi -r -i 1\)/);
    expect(checkOf(document, 'gpu.recovery-action', 'GPU 0 ')).toMatchObject({ status: 'pass', evidence: { recoveryAction: 'none' } });
    // A driver without the field (before r570): nothing to judge, a pass that says so.
    expect(checkOf(document, 'gpu.recovery-action', 'GPU 2 ')).toMatchObject({ status: 'pass', evidence: { code: 'NVML_ERROR_NOT_SUPPORTED', fn: 'nvmlDeviceGetFieldValues' } });
    expect(document).toMatchObject({ result: 'fail', exitCode: 69 });
  });

  it('warns about persistence mode off on a multi-GPU host, not on a single GPU', async () => {
    const multi = await doctor(writeScenario({ devices: [simDevice(0, { persistenceMode: false }), simDevice(1)] }));
    expect(notPassing(multi.document)).toEqual(['GPU 0 (GPU-7e570000-0000-4000-8000-000000000000): gpu.persistence-mode warn']);
    expect(checkOf(multi.document, 'gpu.persistence-mode', 'GPU 0 ').summary).toContain('2-GPU host');
    expect(multi.document.exitCode).toBe(75);
    const single = await doctor(writeScenario({ devices: [simDevice(0, { persistenceMode: false })] }));
    expect(notPassing(single.document)).toEqual([]);
    expect(single.document.exitCode).toBe(0);
  });

  it('explains the Xids of a kernel log, matched to the GPU by bus id: a fallen-off GPU fails, an application fault warns', async () => {
    const scenario = bundledScenario('idle-8x-rtx-pro-6000');
    // GPU 3 of the idle host is 00000000:5D:00.0.
    const log = kernelLog([
      '6,1024,8812415032,-;NVRM: Xid (PCI:0000:5d:00): 79, pid=\'<unknown>\', name=<unknown>, GPU has fallen off the bus.',
      ' SUBSYSTEM=pci',
      '4,1025,8812415101,-;NVRM: GPU at PCI:0000:5d:00: GPU-1e95d3a7-6b2c-4d80-a4f1-9c3e8b7d0f52',
      '4,1026,9120002417,-;NVRM: Xid (PCI:0000:18:00): 13, pid=93310, name=python3, Graphics Exception: ESR 0x515848=0x1000000',
    ]);
    const { document } = await doctor(scenario, { kernelLog: log });
    const fallen = checkOf(document, 'kernel.xid-79');
    expect(fallen).toMatchObject({ status: 'fail', subject: 'kernel log' });
    expect(fallen.evidence).toMatchObject({ count: 1, gpus: [{ pciAddress: '0000:5d:00', gpu: 3 }], lastUptimeSeconds: 8812.415032 });
    expect(fallen.summary).toContain('fallen off the bus');
    expect(checkOf(document, 'kernel.xid-13')).toMatchObject({ status: 'warn', evidence: { gpus: [{ gpu: 0 }] } });
    expect(notPassing(document)).toEqual(['kernel log: kernel.xid-13 warn', 'kernel log: kernel.xid-79 fail']);
    expect(document.exitCode).toBe(69);
  });

  it('recognises an Xid line whose process name holds a raw CR, U+2028 or U+2029, and prints it escaped', async () => {
    const scenario = bundledScenario('idle-8x-rtx-pro-6000');
    // Anyone can name a process so; the driver copies the name into the line as it is.
    const log = kernelLog([
      '4,1030,9120002417,-;NVRM: Xid (PCI:0000:18:00): 13, pid=93310, name=py\rthon, Graphics Exception',
      '4,1031,9120002418,-;NVRM: Xid (PCI:0000:18:00): 13, pid=93311, name=py\u2028thon, Graphics Exception',
      '4,1032,9120002419,-;NVRM: Xid (PCI:0000:18:00): 13, pid=93312, name=py\u2029thon, Graphics Exception',
    ]);
    const { run, document } = await doctor(scenario, { kernelLog: log });
    expect(checkOf(document, 'kernel.xid-13')).toMatchObject({ status: 'warn', evidence: { count: 3, gpus: [{ pciAddress: '0000:18:00', gpu: 0 }] } });
    expect(run.stdout).not.toMatch(/[\r\u2028\u2029]/);
    const text = await runCli(['doctor', '--kernel-log', log], { env: env(scenario), killAfterMs: 60_000 });
    expect(text.stdout).toMatch(/Xid 13 .*logged 3 time\(s\)/);
    expect(text.stdout + text.stderr).not.toMatch(/[\r\u2028\u2029]/);
  });

  it('explains NVML_ERROR_LIB_RM_VERSION_MISMATCH at init, still runs the host and kernel-log checks, and exits 69', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlInit_v2', return: 18 }] });
    fs.writeFileSync(path.join(work, 'version-570'), MODULE_LINE.replace('580.95.05', '570.86.15'));
    const { document } = await doctor(scenario, { env: env(scenario, { GPUGATE_DRIVER_VERSION_FILE: path.join(work, 'version-570') }) });
    const nvml = checkOf(document, 'driver.nvml');
    expect(nvml).toMatchObject({ status: 'fail', evidence: { code: 'NVML_ERROR_LIB_RM_VERSION_MISMATCH', kernelModuleVersion: '570.86.15' } });
    expect(nvml.summary).toContain('different versions');
    expect(nvml.advice).toMatch(/reboot/);
    expect(document).toMatchObject({ library: null, gpuCount: 0, exitCode: 69 });
    expect(document.checks.map((c) => c.subject)).toEqual(expect.arrayContaining(['kernel log', 'host']));
    expect(document.checks.some((c) => c.subject.startsWith('GPU '))).toBe(false);
  });

  it('fails when the library and the loaded kernel module are different versions, and warns when the module is unreadable', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)] });
    fs.writeFileSync(path.join(work, 'version-old'), MODULE_LINE.replace('580.95.05', '575.51.03'));
    const differ = await doctor(scenario, { env: env(scenario, { GPUGATE_DRIVER_VERSION_FILE: path.join(work, 'version-old') }) });
    expect(checkOf(differ.document, 'driver.version-match')).toMatchObject({ status: 'fail', evidence: { libraryVersion: '580.95.05', kernelModuleVersion: '575.51.03' } });
    const absent = await doctor(scenario, { env: env(scenario, { GPUGATE_DRIVER_VERSION_FILE: path.join(work, 'no-such-version') }) });
    expect(checkOf(absent.document, 'driver.version-match').status).toBe('warn');
    expect(absent.document.exitCode).toBe(75);
  });

  it('warns about the 535.43-535.86 branch, read through that driver profile', async () => {
    const scenario = bundledScenario('r535-stride');
    fs.writeFileSync(path.join(work, 'version-535'), MODULE_LINE.replace('580.95.05', '535.54.03'));
    const { document } = await doctor(scenario, { env: env(scenario, { GPUGATE_DRIVER_VERSION_FILE: path.join(work, 'version-535') }) });
    expect(checkOf(document, 'driver.branch')).toMatchObject({ status: 'warn', evidence: { driverVersion: '535.54.03' } });
    expect(checkOf(document, 'driver.version-match').status).toBe('pass');
    expect(checkOf(document, 'driver.cuda-version').status).toBe('pass');
  });

  it('fails when the device nodes are missing, and when the driver\'s CUDA is too old for the GPUs', async () => {
    const scenario = writeScenario({ system: { driverVersion: '580.95.05', nvmlVersion: '13.580.95.05', cudaDriverVersion: 12020 }, devices: [simDevice(0)] });
    const { document } = await doctor(scenario, { env: env(scenario, { GPUGATE_DEV_DIR: path.join(work, 'no-dev') }) });
    expect(checkOf(document, 'host.device-nodes')).toMatchObject({ status: 'fail' });
    expect(checkOf(document, 'host.device-nodes').summary).toContain('nvidiactl');
    expect(checkOf(document, 'driver.cuda-version')).toMatchObject({ status: 'fail', evidence: { unsupported: [{ index: 0, capability: '12.0', needs: '12.8' }] } });
  });

  it('warns about CUDA_VISIBLE_DEVICES ordinals on a mixed host unless CUDA_DEVICE_ORDER=PCI_BUS_ID', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1, { name: 'NVIDIA H100 80GB HBM3', computeCapability: [9, 0] })] });
    const mixed = await doctor(scenario, { env: env(scenario, { CUDA_VISIBLE_DEVICES: '1,0' }) });
    expect(checkOf(mixed.document, 'host.cuda-device-order')).toMatchObject({ status: 'warn', evidence: { CUDA_VISIBLE_DEVICES: '1,0', CUDA_DEVICE_ORDER: null } });
    const ordered = await doctor(scenario, { env: env(scenario, { CUDA_VISIBLE_DEVICES: '1,0', CUDA_DEVICE_ORDER: 'PCI_BUS_ID' }) });
    expect(checkOf(ordered.document, 'host.cuda-device-order').status).toBe('pass');
    // The H100 registers with the fabric by default: a completed registration passes.
    expect(checkOf(ordered.document, 'gpu.fabric', 'GPU 1 ').summary).toContain('registered with the fabric');
  });

  it('warns from a nested PID namespace (a real one) that holders cannot be attributed', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)] });
    const child = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, cliPath(), 'doctor', '--json', '--kernel-log', emptyLog],
      { env: env(scenario), encoding: 'utf8', timeout: 60_000 });
    expect(child.stderr).toBe('');
    const document = JSON.parse(child.stdout) as Document;
    expect(checkOf(document, 'host.pid-namespace')).toMatchObject({ status: 'warn', evidence: { nested: true } });
    // From inside, the host's daemon is out of sight: that is not called a fault.
    expect(checkOf(document, 'host.persistenced').status).toBe('pass');
    expect(child.status).toBe(75);
  });

  it('ends with exit 69 when a health query hangs: that GPU\'s readings fail with the stuck function named, the checks read before it stay', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetRemappedRows', device: 1, hang: true }] });
    const { document } = await doctor(scenario, { args: ['--nvml-timeout', '500ms'] });
    expect(checkOf(document, 'gpu.health', 'GPU 1 ')).toMatchObject({ status: 'fail', evidence: { code: 'GPUGATE_TIMEOUT', fn: 'nvmlDeviceGetRemappedRows' } });
    expect(checkOf(document, 'gpu.remapped-rows', 'GPU 0 ').status).toBe('pass');
    expect(checkOf(document, 'gpu.persistence-mode', 'GPU 1 ').status).toBe('pass');
    expect(document.checks.some((c) => c.id === 'gpu.remapped-rows' && c.subject.startsWith('GPU 1 '))).toBe(false);
    expect(checkOf(document, 'host.device-nodes').status).toBe('pass');
    expect(document.exitCode).toBe(69);
  });

  it('a hung health query closes the session: the GPUs after it fail with GPUGATE_SESSION_CLOSED and the same advice about the hang', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1), simDevice(2)], faults: [{ function: 'nvmlDeviceGetRemappedRows', device: 1, hang: true }] });
    const { document } = await doctor(scenario, { args: ['--nvml-timeout', '500ms'] });
    expect(checkOf(document, 'gpu.health', 'GPU 1 ')).toMatchObject({ status: 'fail', evidence: { code: 'GPUGATE_TIMEOUT' } });
    const after = checkOf(document, 'gpu.health', 'GPU 2 ');
    expect(after).toMatchObject({ status: 'fail', evidence: { code: 'GPUGATE_SESSION_CLOSED' } });
    expect(JSON.stringify(after)).toMatch(/an NVML call hung in the driver/);
    expect(document.exitCode).toBe(69);
  });

  it('passes a query the GPU does not support, warns on one that failed otherwise, fails on a GPU lost mid-way', async () => {
    const scenario = writeScenario({
      devices: [simDevice(0, { remappedRows: null, pcieLink: null }), simDevice(1)],
      faults: [
        { function: 'nvmlDeviceGetCurrentClocksEventReasons', device: 1, return: 4 },
        { function: 'nvmlDeviceGetTotalEccErrors', device: 1, return: 15 },
      ],
    });
    const { document } = await doctor(scenario);
    expect(checkOf(document, 'gpu.remapped-rows', 'GPU 0 ')).toMatchObject({ status: 'pass', evidence: { code: 'NVML_ERROR_NOT_SUPPORTED', fn: 'nvmlDeviceGetRemappedRows' } });
    expect(checkOf(document, 'gpu.pcie-link', 'GPU 0 ').status).toBe('pass');
    expect(checkOf(document, 'gpu.clock-events', 'GPU 1 ')).toMatchObject({ status: 'warn', evidence: { code: 'NVML_ERROR_NO_PERMISSION' } });
    expect(checkOf(document, 'gpu.ecc-errors', 'GPU 1 ')).toMatchObject({ status: 'fail', evidence: { code: 'NVML_ERROR_GPU_IS_LOST' } });
    expect(document.exitCode).toBe(69);
  });

  it('prints text grouped by subject, failures with what to do, passing GPU checks on one line, and the tally', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1, { remappedRows: { failureOccurred: true } })] });
    const run = await runCli(['doctor', '--kernel-log', emptyLog], { env: env(scenario) });
    expect(run.code).toBe(69);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe('driver');
    const gpu1 = lines.indexOf('GPU 1 (GPU-7e570000-0000-4000-8000-000000000001)');
    expect(lines[gpu1 + 1]).toMatch(/^ {2}FAIL {2}row remapping failed/);
    expect(lines[gpu1 + 2]).toMatch(/^ {8}-> the GPU has run out of spare memory rows/);
    expect(lines[gpu1 + 3]).toMatch(/^ {2}pass {2}reachable, recovery-action, persistence-mode, compute-mode, mig-mode, ecc-errors/);
    expect(lines).toContain('kernel log');
    expect(lines).toContain('host');
    expect(run.stdout).toMatch(/\n\d+ checks: \d+ pass, 0 warn, 1 fail \(exit 69\)\n$/);
  });
});

describe.skipIf(!inInitialPidNamespace)('gpugate doctor text output', () => {
  it('escapes what the host supplies: a UUID carrying terminal control characters is printed inert', async () => {
    const scenario = writeScenario({ devices: [simDevice(0, { uuid: 'GPU-\u001b]0;owned\u0007-1', remappedRows: { pending: true } })] });
    const run = await runCli(['doctor', '--kernel-log', emptyLog], { env: env(scenario) });
    expect(run.code).toBe(75);
    expect(run.stdout).not.toContain('\u001b');
    expect(run.stdout).not.toContain('\u0007');
    expect(run.stdout).toContain('GPU 0 (GPU-\\x1b]0;owned\\x07-1)');
  });
});

describe('gpugate doctor usage', () => {
  it('rejects a bad --nvml-timeout and an empty --kernel-log with exit 64, and lists itself in --help', async () => {
    expect((await runCli(['doctor', '--nvml-timeout', 'soon'], { env: cliEnv(null) })).code).toBe(64);
    const empty = await runCli(['doctor', '--kernel-log', ''], { env: cliEnv(null) });
    expect(empty.code).toBe(64);
    expect(empty.stderr).toContain('--kernel-log');
    const help = await runCli(['doctor', '--help'], { env: cliEnv(null) });
    expect(help.stdout).toContain('--kernel-log PATH');
    expect(help.stdout).toMatch(/75 +warnings only/);
    expect((await runCli(['--help'], { env: cliEnv(null) })).stdout).toMatch(/\n {2}doctor +read-only health checks/);
  });
});
