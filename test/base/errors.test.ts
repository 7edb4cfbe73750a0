/**
 * The error family: every error class in src/ extends GpugateError, carries its own name and a
 * stable code, keeps a cause, and the exit code of each comes from its class or code (an error
 * that only borrows a name gets none).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CliError } from '../../src/cli/cli-error';
import { ExitCode, exitCodeForError } from '../../src/cli/exit-codes';
import { InterruptedError } from '../../src/cli/interrupted-error';
import { ConfigError } from '../../src/config-error';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { GpuWaitTimeoutError } from '../../src/gate/wait-timeout-error';
import { GpuWaitAbortError } from '../../src/gate/wait';
import { ErrorCode, GpugateError } from '../../src/gpugate-error';
import * as api from '../../src/index';
import { NativeLoadError, describeNativeRuntime } from '../../src/nvml/native-load-error';
import { NvmlError, type NvmlErrorCode } from '../../src/nvml/nvml-error';
import { GpuLeaseError } from '../../src/host/gpu-lease';
import { ForeignFileError } from '../../src/host/owned-file';
import { FileSystemError, UnsafePathError } from '../../src/host/safe-file';
import { SystemdUnavailableError } from '../../src/host/systemd-unit';
import { SimLibraryNotFoundError, simProfileForScenario } from '../../src/simulator/sim-library';
import { UsageError } from '../../src/usage-error';

const SRC = join(__dirname, '..', '..', 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

const cause = new Error('the underlying failure');
const members: Array<[GpugateError, string, string]> = [
  [new UsageError('12XB', 'a size', undefined, { cause }), 'UsageError', ErrorCode.usage],
  [new ConfigError('minFree', 'too much', { cause }), 'ConfigError', ErrorCode.config],
  [new DeviceSelectionError('9', ['0', '1'], 'no GPU 9', { cause }), 'DeviceSelectionError', ErrorCode.deviceSelection],
  [new GpuWaitTimeoutError(1000, null, { cause }), 'GpuWaitTimeoutError', ErrorCode.waitTimeout],
  [new GpuWaitAbortError(null, cause), 'AbortError', ErrorCode.aborted],
  [new InterruptedError('SIGINT', { cause }), 'AbortError', ErrorCode.aborted],
  [new CliError('refused', ExitCode.noPermission, 'no-permission', { cause }), 'CliError', ErrorCode.command],
  [new NativeLoadError(describeNativeRuntime(), [], cause), 'NativeLoadError', ErrorCode.noNativeBuild],
  [new SimLibraryNotFoundError('gpugate_sim', ['/nowhere/gpugate_sim.so'], { cause }), 'SimLibraryNotFoundError', ErrorCode.simLibraryNotFound],
  [new GpuLeaseError(ErrorCode.leaseLockTimeout, '/run/gpugate/leases/.lock', 'held too long', { cause }), 'GpuLeaseError', ErrorCode.leaseLockTimeout],
  [new SystemdUnavailableError('systemctl is not installed', { cause }), 'SystemdUnavailableError', ErrorCode.systemdUnavailable],
  [new ForeignFileError('/etc/systemd/system/vllm.service.d/gpugate.conf', 'not ours: left alone', { cause }), 'ForeignFileError', ErrorCode.foreignFile],
  [new UnsafePathError('/var/lib/textfile/gpu.prom', 'a symbolic link', { cause }), 'UnsafePathError', ErrorCode.unsafePath],
  [new FileSystemError('/run/gpugate/leases', 'ENOSPC', 'write', 'no space left', { cause }), 'FileSystemError', ErrorCode.fileSystem],
  [new FileSystemError('/run/gpugate/leases', 'EACCES', 'open', 'permission denied', { cause }), 'FileSystemError', ErrorCode.fileAccess],
  [new NvmlError({ code: 'NVML_ERROR_GPU_IS_LOST', nvmlReturn: 15, fn: 'nvmlDeviceGetMemoryInfo_v2', device: 0, message: 'lost', cause }), 'NvmlError', 'NVML_ERROR_GPU_IS_LOST'],
];

describe('the error family', () => {
  it('every error class declared in src/ extends GpugateError (or is GpugateError itself)', () => {
    const outside: string[] = [];
    for (const file of sourceFiles(SRC)) {
      for (const match of readFileSync(file, 'utf8').matchAll(/class (\w+) extends (\w+)/g)) {
        if (match[2] === 'Error' && match[1] !== 'GpugateError') outside.push(`${relative(SRC, file)}: ${match[1]}`);
      }
    }
    expect(outside).toEqual([]);
  });

  it.each(members.map(([error, name, code]) => [error.constructor.name, error, name, code] as const))('%s: instanceof GpugateError and Error, its name, its code, its cause', (_, error, name, code) => {
    expect(error).toBeInstanceOf(GpugateError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe(name);
    expect(error.code).toBe(code);
    expect(error.cause).toBe(cause);
    expect(String(error).startsWith(`${name}: `)).toBe(true);
    expect(error.stack?.startsWith(`${name}: `)).toBe(true);
  });

  it('every error class declared in src/ is a member of AnyGpugateError, the union that narrows by code', () => {
    const declared = sourceFiles(SRC).flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/class (\w+) extends GpugateError\b/g)].map((m) => m[1]));
    const union = readFileSync(join(SRC, 'error-union.ts'), 'utf8');
    const members = /export type AnyGpugateError =([^;]+);/.exec(union)?.[1]?.split('|').map((name) => name.trim()).filter((name) => name !== '') ?? [];
    expect(declared.length).toBeGreaterThan(10);
    expect([...members].sort()).toEqual([...declared].sort());
    expect(api.isGpugateError(new UsageError('x', 'y'))).toBe(true);
    expect(api.isGpugateError(Object.assign(new Error('borrowed'), { code: ErrorCode.usage }))).toBe(false);
  });

  it('a simulator scenario that cannot be read or names no driver is a ConfigError naming the scenario, not a plain Error', () => {
    const missing = join(__dirname, '..', 'no-such-scenario.json');
    expect(() => simProfileForScenario(missing)).toThrow(expect.objectContaining({ name: 'ConfigError', code: ErrorCode.config, option: 'scenario', message: expect.stringContaining(missing) }));
  });

  it('keeps no cause when none is given', () => {
    expect('cause' in new UsageError('x', 'y')).toBe(false);
    expect('cause' in new GpuWaitAbortError(null)).toBe(false);
  });

  it('the package exports the base class and the codes', () => {
    expect(api.GpugateError).toBe(GpugateError);
    expect(api.ErrorCode).toBe(ErrorCode);
    expect(new api.UsageError('x', 'y')).toBeInstanceOf(api.GpugateError);
    expect(Object.values(ErrorCode).every((code) => code === 'ABORT_ERR' || code.startsWith('GPUGATE_'))).toBe(true);
    expect(new Set(Object.values(ErrorCode)).size).toBe(Object.values(ErrorCode).length);
  });
});

describe('exitCodeForError decides by class and code', () => {
  it('maps every code of the family to a documented exit code, none to "internal error" (a CliError carries its own)', () => {
    const mapped = Object.values(ErrorCode).filter((code) => code !== ErrorCode.command).map((code) => [code, exitCodeForError(Object.assign(new Error(code), { code }))] as const);
    for (const [code, exit] of mapped) expect(exit, code).not.toBe(ExitCode.software);
    expect(Object.fromEntries(mapped)).toMatchObject({
      GPUGATE_USAGE: ExitCode.usage,
      GPUGATE_CONFIG: ExitCode.config,
      GPUGATE_DEVICE_SELECTION: ExitCode.config,
      GPUGATE_WAIT_TIMEOUT: ExitCode.tempFail,
      GPUGATE_TIMEOUT: ExitCode.unavailable,
      GPUGATE_NO_NATIVE_BUILD: ExitCode.unavailable,
      GPUGATE_LEASE_LOCK_TIMEOUT: ExitCode.tempFail,
      GPUGATE_LEASE_NAMESPACE: ExitCode.config,
      GPUGATE_SYSTEMD_UNAVAILABLE: ExitCode.unavailable,
      GPUGATE_FOREIGN_FILE: ExitCode.noPermission,
      GPUGATE_UNSAFE_PATH: ExitCode.noPermission,
      GPUGATE_FILE_ACCESS: ExitCode.noPermission,
      GPUGATE_FILE_SYSTEM: ExitCode.osError,
    });
  });

  it('an interruption ends with its own signal, also as the cause of the wait it aborted', () => {
    expect(exitCodeForError(new InterruptedError('SIGINT'))).toBe(ExitCode.sigint);
    expect(exitCodeForError(new InterruptedError('SIGTERM'))).toBe(ExitCode.sigterm);
    expect(exitCodeForError(new InterruptedError('SIGHUP'))).toBe(ExitCode.sighup);
    expect(exitCodeForError(new GpuWaitAbortError(null, new InterruptedError('SIGHUP')))).toBe(ExitCode.sighup);
    expect(exitCodeForError(new GpuWaitAbortError(null, new Error('caller gave up')))).toBe(ExitCode.sigterm);
  });

  it('an NvmlError is "unavailable" whatever its code', () => {
    // A code outside NvmlError's type (as a newer copy of gpugate in the same process might raise).
    const odd = new NvmlError({ code: 'GPUGATE_PROCESS_LIST_IMPLAUSIBLE' as unknown as NvmlErrorCode, nvmlReturn: null, fn: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 0, message: 'odd list' });
    expect(exitCodeForError(odd)).toBe(ExitCode.unavailable);
    expect(exitCodeForError(Object.assign(new Error('unknown code'), { code: 'GPUGATE_PROCESS_LIST_IMPLAUSIBLE' }))).toBe(ExitCode.software);
  });

  it('a CliError ends with the exit code it carries', () => {
    expect(exitCodeForError(new CliError('refused', ExitCode.noPermission, 'no-permission'))).toBe(ExitCode.noPermission);
    expect(exitCodeForError(new CliError('stale', ExitCode.tempFail, 'stale'))).toBe(ExitCode.tempFail);
  });

  it('a name alone decides nothing: an error that only borrows a family name is an internal error', () => {
    for (const name of ['UsageError', 'ConfigError', 'DeviceSelectionError', 'GpuWaitTimeoutError', 'NvmlError', 'AbortError', 'SystemdUnavailableError', 'ForeignFileError', 'UnsafePathError', 'FileSystemError']) {
      expect(exitCodeForError(Object.assign(new Error('borrowed'), { name })), name).toBe(ExitCode.software);
    }
    // A plain object with an exitCode is not a CliError.
    expect(exitCodeForError({ exitCode: ExitCode.ok, message: 'not a CliError' })).toBe(ExitCode.software);
  });
});
