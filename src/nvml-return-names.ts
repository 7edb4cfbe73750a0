/**
 * NVML's names for its return values (nvmlReturn_t, nvml.h): the one list, kept apart from the
 * errors so that the error base class can name the type without loading the NVML layer.
 */

/** Every nvmlReturn_t value gpugate knows, with NVML's name for it. */
export const NVML_RETURN_NAMES = {
  0: 'NVML_SUCCESS',
  1: 'NVML_ERROR_UNINITIALIZED',
  2: 'NVML_ERROR_INVALID_ARGUMENT',
  3: 'NVML_ERROR_NOT_SUPPORTED',
  4: 'NVML_ERROR_NO_PERMISSION',
  5: 'NVML_ERROR_ALREADY_INITIALIZED',
  6: 'NVML_ERROR_NOT_FOUND',
  7: 'NVML_ERROR_INSUFFICIENT_SIZE',
  8: 'NVML_ERROR_INSUFFICIENT_POWER',
  9: 'NVML_ERROR_DRIVER_NOT_LOADED',
  10: 'NVML_ERROR_TIMEOUT',
  11: 'NVML_ERROR_IRQ_ISSUE',
  12: 'NVML_ERROR_LIBRARY_NOT_FOUND',
  13: 'NVML_ERROR_FUNCTION_NOT_FOUND',
  14: 'NVML_ERROR_CORRUPTED_INFOROM',
  15: 'NVML_ERROR_GPU_IS_LOST',
  16: 'NVML_ERROR_RESET_REQUIRED',
  17: 'NVML_ERROR_OPERATING_SYSTEM',
  18: 'NVML_ERROR_LIB_RM_VERSION_MISMATCH',
  19: 'NVML_ERROR_IN_USE',
  20: 'NVML_ERROR_MEMORY',
  21: 'NVML_ERROR_NO_DATA',
  22: 'NVML_ERROR_VGPU_ECC_NOT_SUPPORTED',
  23: 'NVML_ERROR_INSUFFICIENT_RESOURCES',
  24: 'NVML_ERROR_FREQ_NOT_SUPPORTED',
  25: 'NVML_ERROR_ARGUMENT_VERSION_MISMATCH',
  26: 'NVML_ERROR_DEPRECATED',
  27: 'NVML_ERROR_NOT_READY',
  28: 'NVML_ERROR_GPU_NOT_FOUND',
  29: 'NVML_ERROR_INVALID_STATE',
  30: 'NVML_ERROR_RESET_TYPE_NOT_SUPPORTED',
  999: 'NVML_ERROR_UNKNOWN',
} as const;

/**
 * NVML's name for a failed call's return value: one of the names above, or 'NVML_ERROR_<n>' for a
 * value a newer driver returns that this list does not know.
 */
export type NvmlErrorName = Exclude<(typeof NVML_RETURN_NAMES)[keyof typeof NVML_RETURN_NAMES], 'NVML_SUCCESS'> | `NVML_ERROR_${number}`;

/** The name of any nvmlReturn_t value, success included. */
export type NvmlReturnName = NvmlErrorName | typeof NVML_RETURN_NAMES[0];
