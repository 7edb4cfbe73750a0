// NVML running-process lists (compute, graphics, MPS) in every variant, each with its own entry
// layout: plain = 16-byte v1 entries; _v2 = 24-byte entries; _v3 = what the driver profile
// writes (24 bytes, or 32 in 535.43-535.86, whose _v3 appended usedGpuCcProtectedMemory); and
// nvmlDeviceGetRunningProcessDetailList (32-byte nvmlProcessDetail_v1_t). Implements NVML's
// count-then-fill protocol, including INSUFFICIENT_SIZE with the needed count (or a device's
// "claimedProcessCount", as a faulty driver would answer). A GPU in MIG mode
// lists its own processes and those of every MIG device (the combined view NVML gives a
// privileged caller); a MIG handle lists only its own.
#include <cstring>
#include <ctime>
#include <vector>

#include "device_call.h"
#include "export.h"
#include "nvml_abi_extra.h"

using namespace gpugate_sim;

namespace {

enum class Layout { V1, V2, V3 };

/** The processes a handle lists: a MIG device's own, or a GPU's plus (in MIG mode) its slots'. */
std::vector<const SimProcess*> listedProcesses(const Resolved& r, unsigned kind) {
  std::vector<const SimProcess*> out;
  auto add = [&](const std::vector<SimProcess>& list) {
    for (const auto& p : list) {
      if (p.kinds & kind) out.push_back(&p);
    }
  };
  if (r.mig != nullptr) {
    add(r.mig->processes);
    return out;
  }
  add(r.device->processes);
  if (migEnabled(*r.device)) {
    for (const auto& m : r.device->migDevices) add(m.processes);
  }
  return out;
}

size_t entryBytes(Layout layout, int profile) {
  switch (layout) {
    case Layout::V1: return sizeof(nvmlProcessInfo_v1_t);
    case Layout::V2: return sizeof(nvmlProcessInfo_v2_t);
    case Layout::V3: return static_cast<size_t>(v3EntryBytes(profile));
  }
  return sizeof(nvmlProcessInfo_v2_t);
}

/** Writes the entries for `list` into `out` (caller checked the room). */
void writeEntries(const std::vector<const SimProcess*>& list, void* out, size_t stride) {
  char* at = static_cast<char*>(out);
  for (const SimProcess* p : list) {
    uint64_t used = p->usedKnown ? p->usedBytes : GPUGATE_NVML_VALUE_NOT_AVAILABLE_U64;
    nvmlProcessInfo_r535_t e{};  // the widest layout; narrower ones are its prefix
    e.pid = p->pid;
    e.usedGpuMemory = used;
    e.gpuInstanceId = p->hasInstanceIds ? p->gpuInstanceId : GPUGATE_NVML_INSTANCE_ID_NONE;
    e.computeInstanceId = p->hasInstanceIds ? p->computeInstanceId : GPUGATE_NVML_INSTANCE_ID_NONE;
    e.usedGpuCcProtectedMemory = 0;
    if (stride == sizeof(nvmlProcessInfo_v1_t)) {
      nvmlProcessInfo_v1_t v1{};
      v1.pid = e.pid;
      v1.usedGpuMemory = e.usedGpuMemory;
      memcpy(at, &v1, sizeof v1);
    } else {
      memcpy(at, &e, stride);  // 24 bytes: the first four fields; 32: all five
    }
    at += stride;
  }
}

nvmlReturn_t listProcesses(int sym, nvmlDevice_t h, unsigned int* count, void* infos, unsigned kind, Layout layout) {
  return withDevice(sym, h, false, [&](Resolved& r) -> nvmlReturn_t {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::vector<const SimProcess*> list = listedProcesses(r, kind);
    unsigned needed = static_cast<unsigned>(list.size());
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
    writeEntries(list, infos, entryBytes(layout, runtime().live.system.profile));
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
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetComputeRunningProcesses_v2, kKindCompute, Layout::V2)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetComputeRunningProcesses_v3, kKindCompute, Layout::V3)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetGraphicsRunningProcesses_v2, kKindGraphics, Layout::V2)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetGraphicsRunningProcesses_v3, kKindGraphics, Layout::V3)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses_v2, kKindMps, Layout::V2)
GPUGATE_SIM_PROCESS_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses_v3, kKindMps, Layout::V3)

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device, nvmlProcessDetailList_t* plist) {
  return withDevice(kSym_nvmlDeviceGetRunningProcessDetailList, device, false, [&](Resolved& r) -> nvmlReturn_t {
    if (plist == nullptr || plist->version != GPUGATE_NVML_PROCESS_DETAIL_LIST_V1_VERSION) return NVML_ERROR_INVALID_ARGUMENT;
    static const unsigned kinds[] = {kKindCompute, kKindGraphics, kKindMps};  // nvmlProcessMode_t order
    if (plist->mode > 2) return NVML_ERROR_INVALID_ARGUMENT;
    std::vector<const SimProcess*> list = listedProcesses(r, kinds[plist->mode]);
    unsigned needed = static_cast<unsigned>(list.size());
    if (needed == 0) {
      plist->numProcArrayEntries = 0;
      return NVML_SUCCESS;
    }
    if (plist->numProcArrayEntries < needed || plist->procArray == nullptr) {
      plist->numProcArrayEntries = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    writeEntries(list, plist->procArray, sizeof(nvmlProcessDetail_v1_t));
    plist->numProcArrayEntries = needed;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                                             unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  return withDevice(kSym_nvmlDeviceGetProcessUtilization, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (migEnabled(*r.device)) return NVML_ERROR_NOT_SUPPORTED;  // as NVML documents for MIG-enabled GPUs
    std::vector<const SimProcess*> list = listedProcesses(r, kKindCompute | kKindGraphics | kKindMps);
    unsigned needed = static_cast<unsigned>(list.size());
    // One sample per process, stamped now: a caller asking for newer samples than now gets none.
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long nowUs = static_cast<unsigned long long>(ts.tv_sec) * 1000000ull + static_cast<unsigned long long>(ts.tv_nsec / 1000);
    if (needed == 0 || lastSeenTimeStamp >= nowUs) return NVML_ERROR_NOT_FOUND;
    if (utilization == nullptr || *processSamplesCount < needed) {
      *processSamplesCount = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < needed; i++) {
      utilization[i] = nvmlProcessUtilizationSample_t{};
      utilization[i].pid = list[i]->pid;
      utilization[i].timeStamp = nowUs;
      utilization[i].smUtil = list[i]->smUtilization;
      utilization[i].memUtil = list[i]->memoryUtilization;
    }
    *processSamplesCount = needed;
    return NVML_SUCCESS;
  });
}
