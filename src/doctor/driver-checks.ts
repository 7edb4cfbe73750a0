/**
 * The driver checks of `gpugate doctor`: NVML loads and initialises; the NVML library and the
 * loaded kernel module are the same version (NVML_ERROR_LIB_RM_VERSION_MISMATCH explained); the
 * driver branch is not one whose process lists other tools misread; the driver's CUDA version
 * supports every GPU's architecture.
 */
import { adviceForNvmlCode, looksLikeContainer } from '../nvml/nvml-error';
import type { LibraryInfo } from '../types';
import type { DoctorCheck } from './doctor-check';

/** Where the loaded NVIDIA kernel module states its version. */
export const KERNEL_MODULE_VERSION_PATH = '/proc/driver/nvidia/version';

/** The first and last driver versions whose _v3 process lists write 32-byte entries. */
export const PROCESS_LIST_STRIDE_BRANCH = { first: [535, 43], last: [535, 86] } as const;

/** The oldest CUDA driver version (major, minor) that runs each compute capability, newest first. */
const CUDA_FOR_CAPABILITY: ReadonlyArray<readonly [capability: number, cuda: number]> = [
  [12.0, 12.8],
  [10.0, 12.8],
  [9.0, 11.8],
  [8.9, 11.8],
  [8.7, 11.4],
  [8.6, 11.1],
  [8.0, 11.0],
  [7.5, 10.0],
  [7.0, 9.0],
  [6.0, 8.0],
];

/** How opening NVML failed (an NvmlError's stable fields). */
export interface NvmlOpenFailure {
  code: string;
  nvmlReturn: number | null;
  fn: string | null;
  message: string;
  /** NVML hung: "stuck in the kernel for N s in F" (an earlier helper found stuck, or this session's deadline passed). */
  notResponding?: string;
  /** The NVML helper process left in the driver: the earlier one found stuck, or the one this session abandoned at its deadline. */
  helperPid?: number | null;
}

/** What the driver checks judge. */
export interface DriverFacts {
  /** The opened library's versions; null when NVML could not be opened. */
  library: LibraryInfo | null;
  openFailure: NvmlOpenFailure | null;
  /** The library file that loaded (or would), symlinks resolved; null when unknown. */
  libraryFile: string | null;
  /** The text of /proc/driver/nvidia/version, or why it could not be read. */
  kernelModule: { kind: 'ok'; path: string; text: string } | { kind: 'unreadable'; path: string; reason: string };
  /** Each GPU's compute capability ('12.0'), from the session's identities. */
  computeCapabilities: ReadonlyArray<{ index: number; capability: string | null }>;
}

const SUBJECT = 'driver';

/** "580.95.05" from the kernel module's version text ("NVRM version: NVIDIA UNIX ... Kernel Module  580.95.05  ..."). */
export function kernelModuleVersion(text: string): string | null {
  const line = text.split('\n').find((l) => l.startsWith('NVRM version:'));
  if (line === undefined) return null;
  const match = /Module\b.*?\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)/.exec(line);
  return match?.[1] ?? null;
}

/** The driver version of the NVML library: its file's version suffix, else its NVML version less the CUDA major. */
export function libraryDriverVersion(libraryFile: string | null, nvmlVersion: string | null): string | null {
  const fromFile = libraryFile === null ? null : /libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$/.exec(libraryFile)?.[1] ?? null;
  if (fromFile !== null) return fromFile;
  if (nvmlVersion === null) return null;
  const parts = nvmlVersion.split('.');
  return parts.length >= 3 ? parts.slice(1).join('.') : null;
}

function versionKey(version: string): [number, number] | null {
  const match = /^(\d+)\.(\d+)/.exec(version);
  return match === null ? null : [Number(match[1]), Number(match[2])];
}

function compareKeys(a: readonly [number, number], b: readonly [number, number]): number {
  return a[0] !== b[0] ? a[0] - b[0] : a[1] - b[1];
}

/** What to do about an open failure other than a version mismatch. */
function openAdvice(failure: NvmlOpenFailure | null): string {
  if (failure?.code === 'GPUGATE_LIBRARY_NOT_FOUND') {
    return 'no NVML library was found: install the NVIDIA driver, or point --library (GPUGATE_NVML_LIBRARY) at libnvidia-ml.so.1; in a container, run it with the NVIDIA container toolkit';
  }
  if (failure?.code === 'GPUGATE_TIMEOUT') return 'NVML hung while opening: check the kernel log for Xid errors and whether nvidia-smi hangs too';
  const advice = failure?.nvmlReturn === null || failure?.nvmlReturn === undefined ? null : adviceForNvmlCode(failure.nvmlReturn, true, looksLikeContainer());
  return advice ?? 'see the message: the library, the kernel driver or the device nodes are missing or broken';
}

function nvmlCheck(facts: DriverFacts, moduleVersion: string | null): DoctorCheck {
  const failure = facts.openFailure;
  if (failure === null && facts.library !== null) {
    return {
      id: 'driver.nvml', subject: SUBJECT, status: 'pass',
      summary: `NVML ${facts.library.nvmlVersion ?? '?'} initialised (driver ${facts.library.driverVersion ?? '?'})`,
      evidence: { libraryPath: facts.library.path, libraryFile: facts.libraryFile, driverVersion: facts.library.driverVersion, nvmlVersion: facts.library.nvmlVersion },
    };
  }
  if (failure?.notResponding !== undefined) {
    return {
      id: 'driver.nvml', subject: SUBJECT, status: 'fail',
      summary: `NVML not responding (${failure.notResponding})`,
      evidence: { code: failure.code, fn: failure.fn, helperPid: failure.helperPid ?? null, message: failure.message, libraryFile: facts.libraryFile, kernelModuleVersion: moduleVersion },
      advice: failure.code === 'GPUGATE_DRIVER_STUCK'
        ? 'an earlier gpugate NVML helper is stuck in the driver, so NVML was not opened (it would hang too): look for Xid errors below and in the kernel log; nvidia-smi will hang as well; a GPU reset (nvidia-smi -r) or a reboot clears it'
        : 'an NVML call hung in the driver: look for Xid errors below and in the kernel log; nvidia-smi will hang as well; a GPU reset (nvidia-smi -r) or a reboot clears it',
    };
  }
  const mismatch = failure?.code === 'NVML_ERROR_LIB_RM_VERSION_MISMATCH';
  const libraryVersion = libraryDriverVersion(facts.libraryFile, null);
  return {
    id: 'driver.nvml', subject: SUBJECT, status: 'fail',
    summary: mismatch
      ? `nvmlInit: the NVML library${libraryVersion === null ? '' : ` (${libraryVersion})`} and the loaded kernel module${moduleVersion === null ? '' : ` (${moduleVersion})`} are different versions (NVML_ERROR_LIB_RM_VERSION_MISMATCH)`
      : `NVML could not be opened: ${failure?.code ?? 'unknown failure'}`,
    evidence: { code: failure?.code ?? null, nvmlReturn: failure?.nvmlReturn ?? null, fn: failure?.fn ?? null, message: failure?.message ?? null, libraryFile: facts.libraryFile, kernelModuleVersion: moduleVersion },
    advice: mismatch
      ? 'the driver packages were upgraded but the old kernel module is still loaded (or a container carries a library of another driver): reboot, or stop every GPU user (nvidia-persistenced, dcgm, the services) and reload the nvidia modules; in a container, use the host driver\'s library (NVIDIA container toolkit) instead of one baked into the image'
      : openAdvice(failure),
  };
}

function versionMatchCheck(facts: DriverFacts, moduleVersion: string | null): DoctorCheck {
  const libraryVersion = libraryDriverVersion(facts.libraryFile, facts.library?.nvmlVersion ?? null);
  const evidence = { libraryVersion, kernelModuleVersion: moduleVersion, kernelModuleFile: facts.kernelModule.path, libraryFile: facts.libraryFile };
  if (moduleVersion === null) {
    const reason = facts.kernelModule.kind === 'unreadable' ? facts.kernelModule.reason : `no "NVRM version:" line in ${facts.kernelModule.path}`;
    return {
      id: 'driver.version-match', subject: SUBJECT, status: facts.library === null ? 'fail' : 'warn',
      summary: `the kernel module's version is unknown: ${reason}`,
      evidence: { ...evidence, reason },
      advice: 'without /proc/driver/nvidia/version the nvidia kernel module is not loaded (lsmod | grep nvidia); a container that hides /proc/driver cannot be checked from inside',
    };
  }
  if (libraryVersion === null) {
    return {
      id: 'driver.version-match', subject: SUBJECT, status: 'warn',
      summary: `kernel module ${moduleVersion}; the NVML library's version is unknown, so they cannot be compared`,
      evidence,
      advice: 'open NVML successfully first (see driver.nvml)',
    };
  }
  if (libraryVersion !== moduleVersion) {
    return {
      id: 'driver.version-match', subject: SUBJECT, status: 'fail',
      summary: `the NVML library is ${libraryVersion} but the loaded kernel module is ${moduleVersion}`,
      evidence,
      advice: 'reboot, or stop every GPU user and reload the nvidia kernel modules, so library and module come from the same driver',
    };
  }
  return { id: 'driver.version-match', subject: SUBJECT, status: 'pass', summary: `NVML library and kernel module are both ${moduleVersion}`, evidence };
}

function branchCheck(driverVersion: string): DoctorCheck {
  const key = versionKey(driverVersion);
  const { first, last } = PROCESS_LIST_STRIDE_BRANCH;
  const evidence = { driverVersion, strideBranch: `${first.join('.')}-${last.join('.')}` };
  if (key !== null && compareKeys(key, first) >= 0 && compareKeys(key, last) <= 0) {
    return {
      id: 'driver.branch', subject: SUBJECT, status: 'warn',
      summary: `driver ${driverVersion} is one of ${first.join('.')}-${last.join('.')}, whose _v3 process lists write 32-byte entries`,
      evidence,
      advice: 'gpugate measures the entry size, but tools that assume 24 bytes (older nvidia-ml-py, nvitop, gpustat, DCGM builds) see wrong pids and memory after the first process; upgrade the driver to 535.98 or later',
    };
  }
  return { id: 'driver.branch', subject: SUBJECT, status: 'pass', summary: `driver ${driverVersion} has no known process-list quirk`, evidence };
}

function cudaCheck(cudaVersion: string | null, capabilities: DriverFacts['computeCapabilities']): DoctorCheck {
  const evidence = { cudaDriverVersion: cudaVersion, computeCapabilities: capabilities.map((c) => c.capability) };
  if (cudaVersion === null) {
    return { id: 'driver.cuda-version', subject: SUBJECT, status: 'warn', summary: 'the driver reports no CUDA version', evidence,
      advice: 'nvmlSystemGetCudaDriverVersion failed: the driver installation may lack libcuda' };
  }
  const cuda = Number(cudaVersion);
  const unsupported = capabilities.flatMap(({ index, capability }) => {
    if (capability === null) return [];
    const needed = CUDA_FOR_CAPABILITY.find(([cc]) => Number(capability) >= cc)?.[1];
    return needed !== undefined && cuda < needed ? [{ index, capability, needs: needed.toFixed(1) }] : [];
  });
  if (unsupported.length > 0) {
    const first = unsupported[0] as { index: number; capability: string; needs: string };
    return {
      id: 'driver.cuda-version', subject: SUBJECT, status: 'fail',
      summary: `the driver's CUDA ${cudaVersion} is too old for GPU ${first.index} (compute capability ${first.capability} needs CUDA ${first.needs})`,
      evidence: { ...evidence, unsupported },
      advice: 'install a driver whose CUDA version supports these GPUs; until then CUDA applications fail on them',
    };
  }
  return { id: 'driver.cuda-version', subject: SUBJECT, status: 'pass', summary: `CUDA ${cudaVersion} supports every GPU's compute capability`, evidence };
}

/** The driver checks. Checks that need an open NVML session are left out when it could not be opened. */
export function driverChecks(facts: DriverFacts): DoctorCheck[] {
  const moduleVersion = facts.kernelModule.kind === 'ok' ? kernelModuleVersion(facts.kernelModule.text) : null;
  const checks = [nvmlCheck(facts, moduleVersion), versionMatchCheck(facts, moduleVersion)];
  if (facts.library !== null) {
    if (facts.library.driverVersion !== null) checks.push(branchCheck(facts.library.driverVersion));
    checks.push(cudaCheck(facts.library.cudaDriverVersion, facts.computeCapabilities));
  }
  return checks;
}
