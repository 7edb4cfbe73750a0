// The common shape of a per-device NVML entry point: gate the call (count, init check,
// faults), take the state lock, resolve the handle, then run the body on the live device.
#pragma once

#include "lookup.h"

namespace gpugate_sim {

/**
 * Runs `body(Resolved&)` for handle `h` under the state lock; INVALID_ARGUMENT for a handle
 * that is not a live device. When `gpuOnly`, MIG device handles answer NOT_SUPPORTED.
 */
template <typename Body>
nvmlReturn_t withDevice(int sym, nvmlDevice_t h, bool gpuOnly, Body&& body) {
  nvmlReturn_t rc;
  if (gate(sym, handleDeviceIndex(h), &rc)) return rc;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  Resolved r;
  if (!resolve(rt, h, r)) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpuOnly && r.mig != nullptr) return NVML_ERROR_NOT_SUPPORTED;
  return body(r);
}

}  // namespace gpugate_sim
