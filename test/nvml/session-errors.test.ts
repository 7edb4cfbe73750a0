import { describe, expect, it } from 'vitest';
import { adviceForNvmlCode, isFatalNvmlError, NvmlError } from '../../src/nvml/nvml-error';
import { resolveLibraryPath } from '../../src/nvml/library-path';

describe('NvmlError and the fatal-error policy', () => {
  it('is a real Error subclass with stable fields', () => {
    const error = new NvmlError({ code: 'NVML_ERROR_GPU_IS_LOST', nvmlReturn: 15, fn: 'nvmlDeviceGetMemoryInfo_v2', device: 3, message: 'lost' });
    expect(error).toBeInstanceOf(Error);
    expect(error).toBeInstanceOf(NvmlError);
    expect(error.name).toBe('NvmlError');
    expect(error).toMatchObject({ code: 'NVML_ERROR_GPU_IS_LOST', nvmlReturn: 15, fn: 'nvmlDeviceGetMemoryInfo_v2', device: 3 });
    expect(error.stack).toContain('NvmlError');
    expect(new NvmlError({ code: 'GPUGATE_TIMEOUT', nvmlReturn: null, fn: null, message: 'x' }).device).toBeNull();
  });

  it('calls lost GPUs, missing drivers, timeouts and closed sessions fatal, and transient codes not', () => {
    for (const code of ['NVML_ERROR_GPU_IS_LOST', 'NVML_ERROR_RESET_REQUIRED', 'NVML_ERROR_DRIVER_NOT_LOADED',
      'NVML_ERROR_LIB_RM_VERSION_MISMATCH', 'GPUGATE_LIBRARY_NOT_FOUND', 'GPUGATE_TIMEOUT', 'GPUGATE_SESSION_CLOSED']) {
      expect(isFatalNvmlError({ code }), code).toBe(true);
    }
    for (const code of ['NVML_ERROR_NOT_SUPPORTED', 'NVML_ERROR_TIMEOUT', 'NVML_ERROR_INSUFFICIENT_SIZE', 'NVML_ERROR_UNKNOWN', 'NVML_ERROR_NO_PERMISSION']) {
      expect(isFatalNvmlError({ code }), code).toBe(false);
    }
    expect(isFatalNvmlError(new Error('plain'))).toBe(false);
    expect(isFatalNvmlError(null)).toBe(false);
    expect(isFatalNvmlError('NVML_ERROR_GPU_IS_LOST')).toBe(false);
  });

  it('explains UNKNOWN at init inside a container as lost device access', () => {
    expect(adviceForNvmlCode(999, true, true)).toMatch(/daemon-reload/);
    expect(adviceForNvmlCode(999, true, false)).not.toMatch(/daemon-reload/);
    expect(adviceForNvmlCode(999, false, true)).toBeNull();
    expect(adviceForNvmlCode(3, true, false)).toBeNull();
  });
});

describe('library path choice', () => {
  it('prefers the option, then GPUGATE_NVML_LIBRARY, then the default search', () => {
    expect(resolveLibraryPath('/opt/x.so', { GPUGATE_NVML_LIBRARY: '/env.so' })).toEqual({ path: '/opt/x.so', source: 'option' });
    expect(resolveLibraryPath(undefined, { GPUGATE_NVML_LIBRARY: '/env.so' })).toEqual({ path: '/env.so', source: 'GPUGATE_NVML_LIBRARY' });
    expect(resolveLibraryPath(undefined, { GPUGATE_NVML_LIBRARY: '' })).toEqual({ path: null, source: 'default' });
    expect(() => resolveLibraryPath(42, {})).toThrow(/'libraryPath' must be a non-empty string/);
  });
});
