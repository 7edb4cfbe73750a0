// The list of NVML entry points the simulator exports, as one X-macro table.
//
// Each symbol gets a small integer id (SymbolId) used for call counting, fault matching and
// statistics. The table is the same in both library variants; the legacy variant simply does
// not export the names marked VERSIONED (those ending in _v2 / _v3).
#pragma once

// X(name, versioned): versioned = 1 for names the legacy (old driver) variant does not export.
#define GPUGATE_SIM_SYMBOLS(X)                          \
  X(nvmlInit_v2, 1)                                     \
  X(nvmlInit, 0)                                        \
  X(nvmlInitWithFlags, 0)                               \
  X(nvmlShutdown, 0)                                    \
  X(nvmlErrorString, 0)                                 \
  X(nvmlSystemGetDriverVersion, 0)                      \
  X(nvmlSystemGetNVMLVersion, 0)                        \
  X(nvmlSystemGetCudaDriverVersion_v2, 1)               \
  X(nvmlSystemGetCudaDriverVersion, 0)                  \
  X(nvmlSystemGetProcessName, 0)                        \
  X(nvmlDeviceGetCount_v2, 1)                           \
  X(nvmlDeviceGetCount, 0)                              \
  X(nvmlDeviceGetHandleByIndex_v2, 1)                   \
  X(nvmlDeviceGetHandleByIndex, 0)                      \
  X(nvmlDeviceGetHandleByUUID, 0)                       \
  X(nvmlDeviceGetHandleByPciBusId_v2, 1)                \
  X(nvmlDeviceGetHandleByPciBusId, 0)                   \
  X(nvmlDeviceGetName, 0)                               \
  X(nvmlDeviceGetUUID, 0)                               \
  X(nvmlDeviceGetIndex, 0)                              \
  X(nvmlDeviceGetMinorNumber, 0)                        \
  X(nvmlDeviceGetPciInfo_v3, 1)                         \
  X(nvmlDeviceGetPciInfo_v2, 1)                         \
  X(nvmlDeviceGetPciInfo, 0)                            \
  X(nvmlDeviceGetCudaComputeCapability, 0)              \
  X(nvmlDeviceGetMemoryInfo_v2, 1)                      \
  X(nvmlDeviceGetMemoryInfo, 0)                         \
  X(nvmlDeviceGetComputeRunningProcesses_v3, 1)         \
  X(nvmlDeviceGetComputeRunningProcesses_v2, 1)         \
  X(nvmlDeviceGetComputeRunningProcesses, 0)            \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, 1)        \
  X(nvmlDeviceGetGraphicsRunningProcesses_v2, 1)        \
  X(nvmlDeviceGetGraphicsRunningProcesses, 0)           \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3, 1)      \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v2, 1)      \
  X(nvmlDeviceGetMPSComputeRunningProcesses, 0)         \
  X(nvmlDeviceGetPersistenceMode, 0)                    \
  X(nvmlDeviceGetComputeMode, 0)                        \
  X(nvmlDeviceGetMigMode, 0)                            \
  X(nvmlDeviceGetUtilizationRates, 0)                   \
  X(nvmlDeviceGetTemperature, 0)                        \
  X(nvmlDeviceGetPowerUsage, 0)                         \
  X(nvmlDeviceGetMaxMigDeviceCount, 0)                  \
  X(nvmlDeviceGetMigDeviceHandleByIndex, 0)             \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, 0)    \
  X(nvmlDeviceGetGpuInstanceId, 0)                      \
  X(nvmlDeviceGetComputeInstanceId, 0)

namespace gpugate_sim {

enum SymbolId : int {
#define GPUGATE_SIM_SYMBOL_ENUM(name, versioned) kSym_##name,
  GPUGATE_SIM_SYMBOLS(GPUGATE_SIM_SYMBOL_ENUM)
#undef GPUGATE_SIM_SYMBOL_ENUM
  kSymbolCount
};

/** The exported name of a symbol id. */
const char* symbolName(int id);

/** The id of an exported name, or -1. */
int symbolByName(const char* name);

}  // namespace gpugate_sim
