// NVML return codes as stable names, and the driver's own description of a code.
#include "errors.h"

namespace gpugate {

namespace {

struct CodeName {
  nvmlReturn_t code;
  const char* name;
};

constexpr CodeName kCodeNames[] = {
    {NVML_SUCCESS, "NVML_SUCCESS"},
    {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED"},
    {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT"},
    {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED"},
    {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION"},
    {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED"},
    {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE"},
    {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"},
    {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT"},
    {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND"},
    {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM"},
    {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST"},
    {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED"},
    {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
    {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE"},
    {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY"},
    {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"},
    {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED"},
    {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY"},
    {NVML_ERROR_GPU_NOT_FOUND, "NVML_ERROR_GPU_NOT_FOUND"},
    {NVML_ERROR_INVALID_STATE, "NVML_ERROR_INVALID_STATE"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED"},
    {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN"},
};

}  // namespace

std::string NvmlCodeName(nvmlReturn_t code) {
  for (const CodeName& entry : kCodeNames) {
    if (entry.code == code) return entry.name;
  }
  return "NVML_ERROR_" + std::to_string(code);
}

std::string NvmlErrorText(nvmlErrorString_fn errorString, nvmlReturn_t code) {
  if (errorString != nullptr) {
    const char* text = errorString(code);
    if (text != nullptr && text[0] != '\0') return text;
  }
  return NvmlCodeName(code);
}

}  // namespace gpugate

namespace gpugate {

CallError MakeCallError(const SymbolTable& symbols, const std::string& field, Fn fn, nvmlReturn_t code) {
  CallError error;
  error.field = field;
  error.code = code;
  const char* symbol = symbols.Symbol(fn);
  error.symbol = symbol != nullptr ? symbol : PreferredSymbol(fn);
  if (code == NVML_ERROR_FUNCTION_NOT_FOUND && symbol == nullptr) {
    error.message = "the NVML library does not export " + error.symbol + " (or any older variant)";
  } else {
    error.message = NvmlErrorText(symbols.Get<nvmlErrorString_fn>(kErrorString), code);
  }
  return error;
}

bool IsDeviceLevelFailure(nvmlReturn_t code) {
  return code == NVML_ERROR_GPU_IS_LOST || code == NVML_ERROR_RESET_REQUIRED || code == NVML_ERROR_GPU_NOT_FOUND;
}

}  // namespace gpugate
