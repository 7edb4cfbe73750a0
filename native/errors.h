// NVML return codes as stable names, and the driver's own description of a code.
//
// The names match NVML's enum spelling ("NVML_ERROR_GPU_IS_LOST"); a code NVML added after
// this list was written is kept as its number ("NVML_ERROR_<n>"). Descriptions come from the
// loaded library's nvmlErrorString when it is bound, so users see the driver's own words.
#pragma once

#include <string>

#include "nvml_abi.h"

namespace gpugate {

// "NVML_SUCCESS", "NVML_ERROR_GPU_IS_LOST", ... or "NVML_ERROR_<n>" for an unlisted code.
std::string NvmlCodeName(nvmlReturn_t code);

// The library's nvmlErrorString(code) when available (may be null), else the code name.
std::string NvmlErrorText(nvmlErrorString_fn errorString, nvmlReturn_t code);

}  // namespace gpugate

#include "readings.h"
#include "symbols.h"

namespace gpugate {

// A CallError for `field` from a call to the function `fn` (named by the symbol that bound,
// or the newest candidate when none did), with the library's own description of `code`.
CallError MakeCallError(const SymbolTable& symbols, const std::string& field, Fn fn, nvmlReturn_t code);

// Codes that mean the whole device is unusable (lost, needs a reset, gone): reading its
// other fields is pointless and the device carries the error instead of one field.
bool IsDeviceLevelFailure(nvmlReturn_t code);

}  // namespace gpugate
