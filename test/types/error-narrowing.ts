/**
 * A consumer's view of the error contract, compiled (never run) by test/base/error-types.test.ts with
 * `strict`: on an error gpugate raised, `switch (error.code)` narrows to the class and its fields,
 * and a code gpugate does not have is a compile error. Each `@ts-expect-error` fails the
 * compilation if the line below it ever compiles.
 */
import { ConfigError, GpugateError, isGpugateError, NvmlError, type AnyGpugateError, type GpugateErrorCode, type NvmlErrorName } from '../../src/index';

export function describeFailure(error: unknown): string {
  if (!isGpugateError(error)) return 'not gpugate';
  switch (error.code) {
    case 'GPUGATE_TIMEOUT':
      // Narrowed to NvmlError: its own fields are there.
      return `${error.fn ?? '?'} on ${error.device ?? '?'} (${error.nvmlReturn ?? 'no NVML code'})`;
    case 'NVML_ERROR_GPU_IS_LOST':
      return `lost GPU ${error.device ?? '?'}`;
    case 'GPUGATE_WAIT_TIMEOUT':
      return `${error.timeoutMs} ms, ${error.evaluation?.polls ?? 0} polls`;
    case 'GPUGATE_CONFIG':
      return `option ${error.option}`;
    case 'GPUGATE_USAGE':
      return `${error.input}: expected ${error.expected}`;
    case 'GPUGATE_DEVICE_SELECTION':
      return `${error.selector} of ${error.available.join(', ')}`;
    case 'GPUGATE_LEASE_HOLDER_GONE':
      return `lease ${error.path}`;
    case 'GPUGATE_FILE_SYSTEM':
    case 'GPUGATE_FILE_ACCESS':
      return `${error.syscall} ${error.path}: ${error.errno}`;
    case 'GPUGATE_NO_NATIVE_BUILD':
      return error.searched.map((place) => place.dir).join(', ');
    case 'GPUGATE_SIM_LIBRARY_NOT_FOUND':
      return error.tried.join(', ');
    // @ts-expect-error: no such code: a typo is caught by the compiler
    case 'GPUGATE_TIMOUT':
      return 'never';
    default:
      return error.message;
  }
}

export function fieldsOfTheWrongClass(error: AnyGpugateError): void {
  if (error.code === 'GPUGATE_CONFIG') {
    // @ts-expect-error: a ConfigError has no timeoutMs
    void error.timeoutMs;
  }
  if (error.code === 'GPUGATE_WAIT_TIMEOUT') {
    // @ts-expect-error: a GpuWaitTimeoutError has no option
    void error.option;
  }
}

export function codesOfOneClass(error: NvmlError, config: ConfigError): void {
  // @ts-expect-error: an NvmlError never carries GPUGATE_CONFIG
  if (error.code === 'GPUGATE_CONFIG') return;
  // @ts-expect-error: NVML has no such name
  if (error.code === 'NVML_ERROR_GPU_IS_LOTS') return;
  if (error.code === 'NVML_ERROR_12345') return; // a value newer than gpugate's list is still a name NVML may give
  const only: 'GPUGATE_CONFIG' = config.code;
  void only;
}

export function theBaseClass(error: unknown): void {
  if (!(error instanceof GpugateError)) return;
  // The base class's code is the whole union: one of gpugate's codes or NVML's names, not any string.
  const code: GpugateErrorCode | NvmlErrorName = error.code;
  // @ts-expect-error: not a code of gpugate's nor a name of NVML's
  const typo: typeof code = 'GPUGATE_NOPE';
  void typo;
}
