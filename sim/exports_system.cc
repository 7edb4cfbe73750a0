// NVML entry points for the library as a whole: init (all variants), shutdown, error strings
// and the nvmlSystemGet* queries (versions, process names).
#include <cstdio>
#include <cstring>

#include "export.h"
#include "lookup.h"

using namespace gpugate_sim;

GPUGATE_SIM_API nvmlReturn_t nvmlInit(void) { return initialize(kSym_nvmlInit); }

GPUGATE_SIM_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;  // NO_GPUS / NO_ATTACH change nothing here: the simulator never fails for zero GPUs
  return initialize(kSym_nvmlInitWithFlags);
}

GPUGATE_SIM_API nvmlReturn_t nvmlInit_v2(void) { return initialize(kSym_nvmlInit_v2); }

GPUGATE_SIM_API nvmlReturn_t nvmlShutdown(void) { return shutdown(); }

GPUGATE_SIM_API const char* nvmlErrorString(nvmlReturn_t result) {
  runtime().counts[kSym_nvmlErrorString].fetch_add(1, std::memory_order_relaxed);
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires a reset";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "ECC is not supported on this vGPU";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
  }
}

namespace {

nvmlReturn_t systemString(int sym, char* buf, unsigned int length, bool driver) {
  nvmlReturn_t rc;
  if (gate(sym, -1, &rc)) return rc;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  return copyString(driver ? rt.live.system.driverVersion : rt.live.system.nvmlVersion, buf, length);
}

nvmlReturn_t cudaVersion(int sym, int* version) {
  nvmlReturn_t rc;
  if (gate(sym, -1, &rc)) return rc;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  *version = rt.live.system.cudaDriverVersion;
  return NVML_SUCCESS;
}

}  // namespace

GPUGATE_SIM_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return systemString(kSym_nvmlSystemGetDriverVersion, version, length, true);
}

GPUGATE_SIM_API nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return systemString(kSym_nvmlSystemGetNVMLVersion, version, length, false);
}

GPUGATE_SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return cudaVersion(kSym_nvmlSystemGetCudaDriverVersion, version);
}

GPUGATE_SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return cudaVersion(kSym_nvmlSystemGetCudaDriverVersion_v2, version);
}

GPUGATE_SIM_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  nvmlReturn_t rc;
  if (gate(kSym_nvmlSystemGetProcessName, -1, &rc)) return rc;
  if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  for (const auto& d : rt.live.devices) {
    auto match = [&](const std::vector<SimProcess>& list) -> const SimProcess* {
      for (const auto& p : list) {
        if (p.pid == pid && !p.name.empty()) return &p;
      }
      return nullptr;
    };
    const SimProcess* p = match(d.processes);
    for (size_t m = 0; p == nullptr && m < d.migDevices.size(); m++) p = match(d.migDevices[m].processes);
    if (p != nullptr) {
      // NVML truncates the name to the buffer rather than failing.
      size_t n = p->name.size() < length - 1 ? p->name.size() : length - 1;
      memcpy(name, p->name.data(), n);
      name[n] = '\0';
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
