/**
 * How the addon's failures become the NvmlErrors the session API promises: an open that failed
 * (library not found, a function missing, NVML's own code, with what to do), the addon's own
 * coded errors, and what a missed deadline says of the call and of the helper process it leaves.
 */
import {
  adviceForNvmlCode,
  GPUGATE_LIBRARY_NOT_FOUND,
  GPUGATE_NATIVE_FAILURE,
  GPUGATE_NVML_HELPER_CRASHED,
  GPUGATE_NVML_HELPER_MISSING,
  GPUGATE_SESSION_CLOSED,
  GPUGATE_TIMEOUT,
  looksLikeContainer,
  nvmlErrorName,
  NvmlError,
} from './nvml-error';
import type { LibraryPathChoice } from './library-path';
import type { NativeBinding, NativeHelperState, NativeOpenError, NativeSessionHandle } from './native-binding';

function isNativeOpenError(error: unknown): error is NativeOpenError {
  return error instanceof Error && typeof (error as Partial<NativeOpenError>).kind === 'string';
}

/** Turns the addon's open failure into an NvmlError with an actionable message. */
export function openError(error: unknown, choice: LibraryPathChoice): NvmlError {
  if (!isNativeOpenError(error)) {
    return new NvmlError({
      code: GPUGATE_SESSION_CLOSED,
      nvmlReturn: null,
      fn: 'open',
      message: `gpugate: opening NVML failed: ${error instanceof Error ? error.message : String(error)}`,
      cause: error,
    });
  }
  if (error.kind === 'library') {
    const dlerrors = error.attempts.map((a) => (a.error.startsWith(a.path) ? a.error : `${a.path}: ${a.error}`));
    const where =
      choice.source === 'option'
        ? `the library given by the libraryPath option (${choice.path ?? ''}) could not be loaded`
        : choice.source === 'GPUGATE_NVML_LIBRARY'
          ? `the library named by GPUGATE_NVML_LIBRARY (${choice.path ?? ''}) could not be loaded`
          : 'the NVML library (libnvidia-ml.so.1) was not found';
    const hint =
      choice.source === 'default'
        ? 'No NVIDIA driver is installed here, or this is a container without the driver mounted ' +
          '(run it with the NVIDIA container toolkit, e.g. `--gpus all` or the Kubernetes device plugin). ' +
          'Set GPUGATE_NVML_LIBRARY (or the libraryPath option) to the path of libnvidia-ml.so.1; never a CUDA stubs/ copy.'
        : 'Check the path, or unset it to search the driver directories.';
    return new NvmlError({
      code: GPUGATE_LIBRARY_NOT_FOUND,
      nvmlReturn: null,
      fn: 'dlopen',
      message: `gpugate: ${where}. Tried:\n${dlerrors.map((line) => `  - ${line}`).join('\n')}\n${hint}`,
      dlerrors,
    });
  }
  const code = nvmlErrorName(error.nvmlReturn);
  const atInit = error.fn === null || error.fn.startsWith('nvmlInit');
  const advice = error.kind === 'function' ? null : adviceForNvmlCode(error.nvmlReturn, atInit, looksLikeContainer());
  let message = `${error.message} [${code}]`;
  if (advice !== null) message += `: ${advice}`;
  if (error.simulatorError !== null) message += ` (simulator: ${error.simulatorError})`;
  return new NvmlError({ code, nvmlReturn: error.nvmlReturn, fn: error.fn, message, cause: error });
}

/** The codes the addon's own errors carry (native/session_api.cc); each becomes an NvmlError here. */
const ADDON_CODES = [
  GPUGATE_NATIVE_FAILURE,
  GPUGATE_SESSION_CLOSED,
  GPUGATE_TIMEOUT,
  GPUGATE_NVML_HELPER_CRASHED,
  GPUGATE_NVML_HELPER_MISSING,
] as const;

export function isAddonCode(code: unknown): code is (typeof ADDON_CODES)[number] {
  return (ADDON_CODES as readonly unknown[]).includes(code);
}

/**
 * An error of the addon as the NvmlError the API promises (the addon raises plain errors with a
 * code); any other error (an argument the addon refused: a bug of this module) passes unchanged.
 */
export function fromAddon(error: unknown, what: string): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const code = (error as { code?: unknown }).code;
  if (error instanceof NvmlError || !isAddonCode(code)) return error;
  return new NvmlError({ code, nvmlReturn: null, fn: what, message: `gpugate: ${what}: ${error.message}`, cause: error });
}

/** What a timeout says of the helper process it leaves behind ('' in the in-process mode). */
function helperText(helper: NativeHelperState | undefined): string {
  if (helper === undefined) return '';
  const state = helper.state === null ? 'state unknown' : helper.state === 'D' ? 'state D: in the kernel' : `state ${helper.state}`;
  const wchan = helper.wchan === null ? '' : `, wchan ${helper.wchan}`;
  return ` Its NVML helper process (pid ${helper.pid}, ${state}${wchan}) was killed and left behind; it is reaped once the kernel lets it go.`;
}

/** Where a call that missed its deadline is stuck, as the addon last saw it (read before the helper is killed). */
export function stuckCall(
  binding: NativeBinding,
  handle: NativeSessionHandle,
): { fn: string | null; device: number | null; text: string; helperPid: number | null; helperText: string } {
  const { fn, device, helper } = binding.currentCall(handle);
  const helperPid = helper?.pid ?? null;
  if (fn === null) return { fn, device, text: 'an NVML call is stuck in the driver', helperPid, helperText: helperText(helper) };
  const where = device === null ? '' : ` on GPU ${device}`;
  return { fn, device, text: `${fn}${where} is stuck in the driver`, helperPid, helperText: helperText(helper) };
}
