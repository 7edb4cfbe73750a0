// NVML running-process lists (compute, graphics, MPS) in every exported variant, each with its
// own entry layout: plain = 16-byte v1 entries; _v2/_v3 = 24-byte entries, or 32-byte entries
// when the scenario sets "processStride": 32 (drivers 535.43-535.86). Implements NVML's
// count-then-fill protocol, including INSUFFICIENT_SIZE with the needed count (or a device's
// "claimedProcessCount", as a faulty driver would answer).
#include <cstring>

#include "device_call.h"
#include "export.h"

using namespace gpugate_sim;

namespace {

enum class Layout { V1, Current };

nvmlReturn_t listProcesses(int sym, nvmlDevice_t h, unsigned int* count, void* infos, unsigned kind, Layout layout) {
  return withDevice(sym, h, false, [&](Resolved& r) -> nvmlReturn_t {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const std::vector<SimProcess>& all = r.mig != nullptr ? r.mig->processes : r.device->processes;
    unsigned needed = 0;
    for (const auto& p : all) {
      if (p.kinds & kind) needed++;
    }
    // A faulty driver: the size answer claims more entries than exist (until given that much room).
    const uint32_t claimed = r.mig == nullptr ? r.device->claimedProcessCount : 0;
    if (claimed > needed && *count < claimed) {
      *count = claimed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (needed == 0) {
      *count = 0;
      return NVML_SUCCESS;
    }
    if (*count < needed) {
      *count = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    Runtime& rt = runtime();
    size_t stride = layout == Layout::V1 ? sizeof(nvmlProcessInfo_v1_t) : static_cast<size_t>(rt.live.processStride);
    char* out = static_cast<char*>(infos);
    for (const auto& p : all) {
      if (!(p.kinds & kind)) continue;
      uint64_t used = p.usedKnown ? p.usedBytes : GPUGATE_NVML_VALUE_NOT_AVAILABLE_U64;
      if (layout == Layout::V1) {
        nvmlProcessInfo_v1_t e{};
        e.pid = p.pid;
        e.usedGpuMemory = used;
        memcpy(out, &e, sizeof e);
      } else {
        nvmlProcessInfo_r535_t e{};
        e.pid = p.pid;
        e.usedGpuMemory = used;
        e.gpuInstanceId = p.hasInstanceIds ? p.gpuInstanceId : GPUGATE_NVML_INSTANCE_ID_NONE;
        e.computeInstanceId = p.hasInstanceIds ? p.computeInstanceId : GPUGATE_NVML_INSTANCE_ID_NONE;
        e.usedGpuCcProtectedMemory = 0;
        memcpy(out, &e, stride);  // 24 bytes: the first four fields; 32: all five
      }
      out += stride;
    }
    *count = needed;
    return NVML_SUCCESS;
  });
}

}  // namespace

#define GPUGATE_SIM_PROCESS_EXPORT(name, kind, layout)                                                   \
  GPUGATE_SIM_API nvmlReturn_t name(nvmlDevice_t device, unsigned int* infoCount, void* infos) {       \
    return listProcesses(kSym_##name, device, infoCount, infos, kind, layout);                         \
  }

GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetComputeRunningProcesses, kKindCompute, Layout::V1)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetGraphicsRunningProcesses, kKindGraphics, Layout::V1)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses, kKindMps, Layout::V1)
#ifndef GPUGATE_SIM_LEGACY
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetComputeRunningProcesses_v2, kKindCompute, Layout::Current)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetComputeRunningProcesses_v3, kKindCompute, Layout::Current)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetGraphicsRunningProcesses_v2, kKindGraphics, Layout::Current)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetGraphicsRunningProcesses_v3, kKindGraphics, Layout::Current)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses_v2, kKindMps, Layout::Current)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses_v3, kKindMps, Layout::Current)
#endif
