// NVML memory queries: nvmlDeviceGetMemoryInfo_v2 (versioned struct; used excludes reserved, or
// includes it with the system's memoryV2UsedIncludesReserved quirk),
// the plain v1 nvmlDeviceGetMemoryInfo (used includes reserved), BAR1 and the confidential-
// computing memory split. All work on GPU and MIG device handles. This is the simulator's hot path: no allocation, no syscall beyond the
// gate's clock read, one uncontended lock.
#include "device_call.h"
#include "export.h"
#include "nvml_abi_extra.h"

using namespace gpugate_sim;

namespace {

inline uint64_t freeBytes(const SimMemory& m) {
  if (m.freeReported) return m.reportedFreeBytes;
  uint64_t taken = m.reservedBytes + m.usedBytes;
  return taken >= m.totalBytes ? 0 : m.totalBytes - taken;
}

inline const SimMemory& memoryOf(const Resolved& r) { return r.mig != nullptr ? r.mig->memory : r.device->memory; }

}  // namespace

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_v1_t* memory) {
  return withDevice(kSym_nvmlDeviceGetMemoryInfo, device, false, [&](Resolved& r) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const SimMemory& m = memoryOf(r);
    memory->total = m.totalBytes;
    memory->free = freeBytes(m);
    memory->used = m.usedBytes + m.reservedBytes;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return withDevice(kSym_nvmlDeviceGetMemoryInfo_v2, device, false, [&](Resolved& r) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != GPUGATE_NVML_MEMORY_V2_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const SimMemory& m = memoryOf(r);
    memory->total = m.totalBytes;
    memory->reserved = m.reservedBytes;
    memory->free = freeBytes(m);
    memory->used = runtime().live.system.memoryV2UsedIncludesReserved ? m.usedBytes + m.reservedBytes : m.usedBytes;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t* bar1Memory) {
  // A MIG device maps its memory through the parent's BAR1 aperture: it reports the parent's.
  return withDevice(kSym_nvmlDeviceGetBAR1MemoryInfo, device, false, [&](Resolved& r) -> nvmlReturn_t {
    if (bar1Memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->bar1Memory.supported) return NVML_ERROR_NOT_SUPPORTED;
    const SimBar1& b = r.device->bar1Memory.value;
    bar1Memory->bar1Total = b.totalBytes;
    bar1Memory->bar1Used = b.usedBytes;
    bar1Memory->bar1Free = b.totalBytes - b.usedBytes;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, nvmlConfComputeMemSizeInfo_t* memInfo) {
  // Confidential computing is off on every simulated GPU: nothing is protected.
  return withDevice(kSym_nvmlDeviceGetConfComputeMemSizeInfo, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (memInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    memInfo->protectedMemSizeKib = 0;
    memInfo->unprotectedMemSizeKib = r.device->memory.totalBytes / 1024;
    return NVML_SUCCESS;
  });
}
