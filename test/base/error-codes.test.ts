/**
 * Every code of the exported ErrorCode list is reachable: each is triggered through the real API
 * (the real addon against the simulator, real files, processes, namespaces and locks) or, for the
 * command layer's own codes, through the real CLI, and arrives as the class that owns it. The
 * test iterates the exported list, so a new code without a trigger here fails it. The README's
 * error table and the exported list are one fact: compared both ways.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { gate } from '../../src/gate/gate';
import { selectGpus } from '../../src/gate/select';
import { checkGpusOnce, GpuWaitAbortError, waitForGpusFree } from '../../src/gate/wait';
import { GpuWaitTimeoutError } from '../../src/gate/wait-timeout-error';
import { ErrorCode, GpugateError, type GpugateErrorCode } from '../../src/gpugate-error';
import { GpuLeaseError, LeaseDirectory } from '../../src/host/gpu-lease';
import { ForeignFileError, writeOwnedFile } from '../../src/host/owned-file';
import { createFile, FileSystemError, UnsafePathError } from '../../src/host/safe-file';
import { readUnitProperties, SystemdUnavailableError } from '../../src/host/systemd-unit';
import { loadNativeAddon } from '../../src/nvml/load-native-addon';
import { NativeLoadError } from '../../src/nvml/native-load-error';
import { NvmlError } from '../../src/nvml/nvml-error';
import { MAX_PENDING_CALLS, openNvml } from '../../src/nvml/session';
import { refuseIfDriverStuck } from '../../src/gate/stuck-driver';
import { findSimLibrary, SimLibraryNotFoundError } from '../../src/simulator/sim-library';
import { parseSize } from '../../src/units';
import { UsageError } from '../../src/usage-error';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { makeStat } from '../helpers/proc-root';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator, GiB, repoRoot, useScenario } from '../helpers/session-helpers';

/** What a trigger caught: the error, or (from the CLI, another process) the JSON document's error. */
type Caught = { error: unknown } | { cliError: { name: string; code: string | null }; exitCode: number | null };

/** A code no test can reach, and why; each one is listed in the report of this test. */
const UNREACHABLE: Partial<Record<GpugateErrorCode, string>> = {
  // The addon reports a C++ exception inside one call (std::bad_alloc…) instead of crashing; nothing
  // a caller or the simulator does makes the addon throw, short of exhausting the process's memory.
  [ErrorCode.nativeFailure]: 'only an exception inside the addon (out of memory) raises it',
};

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  delete process.env['GPUGATE_SIM_SCENARIO'];
});

function scratchDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gpugate-codes-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function caught(action: () => unknown): Promise<Caught> {
  try {
    await action();
  } catch (error) {
    return { error };
  }
  throw new Error('the trigger raised nothing');
}

function started(child: ChildProcess): ChildProcess {
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

/** The pid of a process that has exited and been reaped. */
function goneProcessPid(): number {
  const run = spawnSync('bash', ['-c', 'true & echo $!; wait'], { encoding: 'utf8' });
  return Number(run.stdout.trim());
}

async function childOf(parent: number): Promise<number> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const run = spawnSync('pgrep', ['-P', String(parent)], { encoding: 'utf8' });
    const pid = Number(run.stdout.trim().split('\n')[0]);
    if (Number.isInteger(pid) && pid > 0) return pid;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no child of ${parent} appeared`);
}

/** The child of `parent` running the NVML helper (a session's helper, spawned at open). */
async function helperChildOf(parent: number): Promise<number> {
  const helperFile = path.join(repoRoot, 'build', 'Release', 'gpugate-nvml-helper');
  for (let attempt = 0; attempt < 500; attempt++) {
    const run = spawnSync('pgrep', ['-P', String(parent)], { encoding: 'utf8' });
    for (const pid of run.stdout.trim().split('\n').filter(Boolean).map(Number)) {
      try {
        if (readlinkSync(`/proc/${pid}/exe`) === helperFile) return pid;
      } catch {
        // gone meanwhile
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no NVML helper child of ${parent} appeared`);
}

async function untilCommandLine(pid: number, pattern: RegExp): Promise<void> {
  for (let attempt = 0; attempt < 1500; attempt++) {
    if (pattern.test(readFileSync(`/proc/${pid}/cmdline`, 'latin1'))) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`the command line of ${pid} never matched ${pattern}`);
}

const BUSY = { devices: [simDevice(0, { memory: { totalBytes: 80 * GiB, reservedBytes: 0, usedBytes: 70 * GiB } })] };

/** One trigger per code, and the class that must carry it. */
const TRIGGERS: Record<GpugateErrorCode, { owner: abstract new (...args: never[]) => GpugateError; cliName?: string; trigger: () => Promise<Caught> }> = {
  [ErrorCode.usage]: { owner: UsageError, trigger: () => caught(() => parseSize('12XB')) },
  [ErrorCode.config]: {
    owner: ConfigError,
    trigger: async () => {
      useScenario(BUSY);
      const outcome = await gate({ libraryPath: freshSimulator(), callTimeoutMs: 2 ** 31 + 5, env: {} });
      return { error: outcome.error };
    },
  },
  [ErrorCode.deviceSelection]: {
    owner: DeviceSelectionError,
    trigger: () => {
      useScenario(BUSY);
      return caught(() => checkGpusOnce({ libraryPath: freshSimulator(), gpus: [7], env: {} }));
    },
  },
  [ErrorCode.waitTimeout]: {
    owner: GpuWaitTimeoutError,
    trigger: () => {
      useScenario(BUSY);
      return caught(() => waitForGpusFree({ libraryPath: freshSimulator(), minFree: { fraction: 0.5 }, timeoutMs: 300, intervalMs: 50, env: {} }));
    },
  },
  [ErrorCode.aborted]: {
    owner: GpuWaitAbortError,
    trigger: () => {
      useScenario(BUSY);
      const controller = new AbortController();
      return caught(() => waitForGpusFree({ libraryPath: freshSimulator(), minFree: { fraction: 0.5 }, intervalMs: 50, env: {}, signal: controller.signal, onPoll: () => controller.abort() }));
    },
  },
  [ErrorCode.command]: {
    // The command layer's own failure: a lease for a process that is gone, refused with 64.
    owner: GpugateError,
    cliName: 'CliError',
    trigger: async () => {
      const run = await runCli(['select', '--count', '1', '--lease-pid', String(goneProcessPid()), '--json'], {
        env: cliEnv(writeScenario({ devices: [simDevice(0)] }), { GPUGATE_LEASE_DIR: path.join(scratchDir(), 'leases') }),
        killAfterMs: 20_000,
      });
      const json = parseJsonOutput(run) as { error: { name: string; code: string | null } };
      return { cliError: json.error, exitCode: run.code };
    },
  },
  [ErrorCode.noNativeBuild]: {
    owner: NativeLoadError,
    trigger: () => {
      const empty = scratchDir();
      const saved = process.env['GPUGATE_PREBUILD'];
      delete process.env['GPUGATE_PREBUILD'];
      cleanups.push(() => {
        if (saved !== undefined) process.env['GPUGATE_PREBUILD'] = saved;
      });
      return caught(() => loadNativeAddon(empty));
    },
  },
  [ErrorCode.simLibraryNotFound]: { owner: SimLibraryNotFoundError, trigger: () => caught(() => findSimLibrary({ packageRoot: scratchDir(), name: 'gpugate_sim_nowhere' })) },
  [ErrorCode.libraryNotFound]: { owner: NvmlError, trigger: () => caught(() => openNvml({ libraryPath: path.join(scratchDir(), 'libnvidia-ml.so.1') })) },
  [ErrorCode.timeout]: {
    owner: NvmlError,
    trigger: async () => {
      useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }] });
      const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 250 });
      const result = await caught(() => session.snapshot());
      await session.close();
      return result;
    },
  },
  [ErrorCode.driverStuck]: {
    // A procfs tree holding one helper asleep in the kernel for an hour (a real one on a frozen
    // file system is in test/host/stuck-driver.test.ts).
    owner: NvmlError,
    trigger: () => {
      const proc = scratchDir();
      const helper = path.join(proc, 'gpugate-nvml-helper');
      mkdirSync(path.join(proc, '4242'));
      symlinkSync(helper, path.join(proc, '4242', 'exe'));
      writeFileSync(path.join(proc, '4242', 'stat'), makeStat(4242, 'gpugate-nvml-he', { 3: 'D' }));
      writeFileSync(path.join(proc, '4242', 'status'), 'Uid:\t0\t0\t0\t0\n');
      writeFileSync(path.join(proc, '4242', 'cmdline'), `gpugate-nvml-helper in nvmlDeviceGetMemoryInfo_v2 gpu 0 since ${Date.now() - 3_600_000}\0`);
      return caught(() => refuseIfDriverStuck({ helperPath: helper, procRoot: proc, stuckAfterMs: 10_000 }));
    },
  },
  [ErrorCode.sessionClosed]: {
    owner: NvmlError,
    trigger: async () => {
      useScenario({ devices: [simDevice(0)] });
      const session = await openNvml({ libraryPath: freshSimulator() });
      await session.close();
      return caught(() => session.snapshot());
    },
  },
  [ErrorCode.queueFull]: {
    owner: NvmlError,
    trigger: async () => {
      // The calls are submitted at once: none can settle before the one past the limit comes.
      useScenario({ devices: [simDevice(0)] });
      const session = await openNvml({ libraryPath: freshSimulator() });
      const pending = Array.from({ length: MAX_PENDING_CALLS }, () => session.snapshot({ memoryOnly: true }));
      const result = await caught(() => session.snapshot({ memoryOnly: true }));
      await Promise.all(pending);
      await session.close();
      return result;
    },
  },
  [ErrorCode.nativeFailure]: { owner: NvmlError, trigger: () => Promise.reject(new Error('unreachable')) },
  [ErrorCode.nvmlHelperCrashed]: {
    owner: NvmlError,
    trigger: async () => {
      // A real SIGSEGV to the session's helper process while it is inside a (delayed) NVML call.
      useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 10_000 }] });
      const session = await openNvml({ libraryPath: freshSimulator() });
      const helper = await helperChildOf(process.pid);
      const pending = caught(() => session.snapshot({ memoryOnly: true }));
      await untilCommandLine(helper, /^gpugate-nvml-helper in /);
      process.kill(helper, 'SIGSEGV');
      const result = await pending;
      await session.close();
      return result;
    },
  },
  [ErrorCode.nvmlHelperMissing]: {
    // An addon whose folder has no helper beside it (GPUGATE_PREBUILD points the CLI at it).
    owner: NvmlError,
    cliName: 'NvmlError',
    trigger: async () => {
      const release = path.join(scratchDir(), 'build', 'Release');
      mkdirSync(release, { recursive: true });
      copyFileSync(path.join(repoRoot, 'build', 'Release', 'gpugate.node'), path.join(release, 'gpugate.node'));
      const run = await runCli(['check', '--json'], {
        env: cliEnv(writeScenario({ devices: [simDevice(0)] }), { GPUGATE_PREBUILD: path.dirname(path.dirname(release)) }),
        killAfterMs: 20_000,
      });
      const json = parseJsonOutput(run) as { error: { name: string; code: string | null } };
      return { cliError: json.error, exitCode: run.code };
    },
  },
  [ErrorCode.memoryImplausible]: {
    owner: NvmlError,
    trigger: () => {
      useScenario({ devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 88 * GiB, freeBytes: 120 * GiB } })] });
      return caught(() => checkGpusOnce({ libraryPath: freshSimulator(), minFree: { fraction: 0.5 }, env: {} }));
    },
  },
  [ErrorCode.memoryUnjudgeable]: {
    owner: NvmlError,
    trigger: () => {
      process.env['GPUGATE_SIM_SCENARIO'] = bundledScenario('unjudgeable-memory');
      return caught(() => checkGpusOnce({ libraryPath: freshSimulator(), gpus: ['MIG-5f2c7d3e-9b4a-5e8f-a016-7d2b3f9a4e01'], minFree: { fraction: 0.5 }, env: {} }));
    },
  },
  [ErrorCode.recoveryRequired]: {
    owner: NvmlError,
    trigger: () => {
      useScenario({ devices: [simDevice(0, { recoveryAction: 'gpu-reset' })] });
      return caught(() => checkGpusOnce({ libraryPath: freshSimulator(), minFree: { fraction: 0.5 }, env: {} }));
    },
  },
  [ErrorCode.systemdUnavailable]: {
    owner: SystemdUnavailableError,
    trigger: () => caught(() => readUnitProperties('vllm.service', { kind: 'systemctl', systemctl: path.join(scratchDir(), 'systemctl') })),
  },
  [ErrorCode.foreignFile]: {
    owner: ForeignFileError,
    trigger: () => {
      const dir = scratchDir();
      const file = path.join(dir, 'gpugate.conf');
      createFile(file, '[Service]\nRestart=always\n', { mode: 0o644 });
      return caught(() => writeOwnedFile(file, '# written by gpugate\n[Service]\n', '# written by gpugate'));
    },
  },
  [ErrorCode.unsafePath]: {
    owner: UnsafePathError,
    trigger: () => {
      // A directory that another user owns (and so may change under gpugate): nothing is written there.
      const dir = path.join(scratchDir(), 'theirs');
      mkdirSync(dir);
      chownSync(dir, 65534, 65534);
      return caught(() => createFile(path.join(dir, 'gpu.prom'), 'x\n', { mode: 0o644 }));
    },
  },
  // sysfs refuses to create files, even for root: a denial by the OS, with nothing written.
  [ErrorCode.fileAccess]: { owner: FileSystemError, trigger: () => caught(() => createFile('/sys/kernel/gpugate-error-codes-test', 'x\n', { mode: 0o644 })) },
  [ErrorCode.fileSystem]: { owner: FileSystemError, trigger: () => caught(() => createFile('/dev/null/gpu.prom', 'x\n', { mode: 0o644 })) },
  [ErrorCode.leaseLockTimeout]: {
    owner: GpuLeaseError,
    trigger: async () => {
      const leases = new LeaseDirectory(path.join(scratchDir(), 'leases'));
      await leases.withLock(() => undefined); // creates the directory and its lock file
      const holder = started(spawn('flock', ['--exclusive', path.join(leases.dir, '.lock'), 'bash', '-c', 'echo held; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] }));
      await new Promise<void>((resolve) => holder.stdout?.once('data', () => resolve()));
      return caught(() => leases.withLock(() => undefined, 100));
    },
  },
  [ErrorCode.leaseNamespace]: {
    owner: GpuLeaseError,
    trigger: async () => {
      // A real nested PID namespace with its own /proc, read through its process's root.
      const nested = started(spawn('unshare', ['--pid', '--fork', '--kill-child', '--mount-proc', 'sleep', '60'], { stdio: 'ignore' }));
      const inside = await childOf(nested.pid ?? 0);
      const leases = new LeaseDirectory(path.join(scratchDir(), 'leases'), { procRoot: `/proc/${inside}/root/proc` });
      return caught(() => leases.recordFor('GPU-00000000-0000-0000-0000-000000000000', null, { holderPid: 1, durationMs: null }));
    },
  },
  [ErrorCode.leaseHolderGone]: {
    owner: GpuLeaseError,
    trigger: () => caught(() => new LeaseDirectory(path.join(scratchDir(), 'leases')).recordFor('GPU-00000000-0000-0000-0000-000000000000', null, { holderPid: goneProcessPid(), durationMs: null })),
  },
  [ErrorCode.leaseClockUnreadable]: {
    owner: GpuLeaseError,
    trigger: () => {
      // A /proc without uptime or boot id: the boot clock a duration is measured on cannot be read.
      const procRoot = scratchDir();
      return caught(() => new LeaseDirectory(path.join(scratchDir(), 'leases'), { procRoot }).recordFor('GPU-00000000-0000-0000-0000-000000000000', null, { holderPid: null, durationMs: 60_000 }));
    },
  },
};

describe('every exported error code is reachable', () => {
  it('each code has a trigger, and only the codes listed as unreachable lack a real one', () => {
    expect(Object.keys(TRIGGERS).sort()).toEqual([...new Set(Object.values(ErrorCode))].sort());
    expect(Object.keys(UNREACHABLE)).toEqual([ErrorCode.nativeFailure]);
  });

  it.each(Object.values(ErrorCode).filter((code) => UNREACHABLE[code] === undefined))('%s arrives as the class that owns it', async (code) => {
    const { owner, cliName, trigger } = TRIGGERS[code];
    const result = await trigger();
    if ('cliError' in result) {
      expect(result.cliError).toMatchObject({ name: cliName, code });
      expect(result.exitCode).not.toBe(70);
      return;
    }
    expect(result.error).toBeInstanceOf(owner);
    expect(result.error).toBeInstanceOf(GpugateError);
    expect((result.error as GpugateError).code).toBe(code);
  }, 30_000);
});

describe('the README error table and ErrorCode are one list', () => {
  it('every code the README names is exported, and every exported code is in the README', () => {
    const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const start = readme.indexOf('Every error gpugate raises is a `GpugateError`');
    const end = readme.indexOf('\n\n', readme.indexOf('| class | `code` |'));
    expect(start).toBeGreaterThan(-1);
    const section = readme.slice(start, end);
    const documented = new Set([...section.matchAll(/`(GPUGATE_[A-Z_]+|ABORT_ERR)`/g)].map((m) => m[1]));
    expect([...documented].sort()).toEqual([...new Set(Object.values(ErrorCode))].sort());
  });
});
