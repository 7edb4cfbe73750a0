// The driver profile table: which NVML driver branches the simulator imitates, what sets them
// apart, and which entry points each one exports.
//
// This file is the single source for all of it. The C++ runtime expands the macros below; the
// build (sim/profile-table.cjs, called from binding.gyp) reads the same lines to write one
// linker version script per profile, so a symbol a profile lacks is absent from that library's
// dynamic symbol table (dlsym finds nothing), not merely answered NOT_SUPPORTED; src/simulator/sim-library.ts
// reads them to pick the library for a scenario. Keep every entry on one line, in the forms below.
#pragma once

// GPUGATE_SIM_PROFILE(token, "name", firstDriver, v3EntryBytes, "what it imitates")
//   firstDriver: the lowest driver version (major * 1000 + minor) the profile stands for; a
//   version belongs to the last profile whose firstDriver it reaches. v3EntryBytes: bytes per
//   entry the _v3 process lists write (0: the profile has no _v3). Oldest first.
#define GPUGATE_SIM_PROFILES(P)                                                                              \
  P(legacy, "legacy", 0, 0, "drivers before R418: only the plain, unversioned entry points")               \
  P(r470, "r470", 418000, 0, "R418-R470: _v2 process lists (24-byte entries), no _v3, no memory _v2")      \
  P(r510, "r510", 510000, 24, "R510-R535.42: _v3 process lists and memory _v2 added")                       \
  P(r535_early, "r535-early", 535043, 32, "535.43-535.86: _v3 writes 32-byte entries, ConfCompute added")  \
  P(current, "current", 535098, 24, "535.98 and later (550, 570, 580): DetailList added, _v3 back to 24")

// GPUGATE_SIM_SYMBOL(name, firstProfile): every NVML entry point the simulator implements and the
// oldest profile that exports it (every later profile does too).
#define GPUGATE_SIM_SYMBOLS(X)                                        \
  X(nvmlInit_v2, r470)                                                \
  X(nvmlInit, legacy)                                                 \
  X(nvmlInitWithFlags, legacy)                                        \
  X(nvmlShutdown, legacy)                                             \
  X(nvmlErrorString, legacy)                                          \
  X(nvmlSystemGetDriverVersion, legacy)                               \
  X(nvmlSystemGetNVMLVersion, legacy)                                 \
  X(nvmlSystemGetCudaDriverVersion_v2, r470)                          \
  X(nvmlSystemGetCudaDriverVersion, legacy)                           \
  X(nvmlSystemGetProcessName, legacy)                                 \
  X(nvmlDeviceGetCount_v2, r470)                                      \
  X(nvmlDeviceGetCount, legacy)                                       \
  X(nvmlDeviceGetHandleByIndex_v2, r470)                              \
  X(nvmlDeviceGetHandleByIndex, legacy)                               \
  X(nvmlDeviceGetHandleByUUID, legacy)                                \
  X(nvmlDeviceGetHandleByPciBusId_v2, r470)                           \
  X(nvmlDeviceGetHandleByPciBusId, legacy)                            \
  X(nvmlDeviceGetName, legacy)                                        \
  X(nvmlDeviceGetUUID, legacy)                                        \
  X(nvmlDeviceGetSerial, legacy)                                      \
  X(nvmlDeviceGetIndex, legacy)                                       \
  X(nvmlDeviceGetMinorNumber, legacy)                                 \
  X(nvmlDeviceGetPciInfo_v3, r470)                                    \
  X(nvmlDeviceGetPciInfo_v2, r470)                                    \
  X(nvmlDeviceGetPciInfo, legacy)                                     \
  X(nvmlDeviceGetCudaComputeCapability, legacy)                       \
  X(nvmlDeviceGetMemoryInfo_v2, r510)                                 \
  X(nvmlDeviceGetMemoryInfo, legacy)                                  \
  X(nvmlDeviceGetBAR1MemoryInfo, legacy)                              \
  X(nvmlDeviceGetConfComputeMemSizeInfo, r535_early)                  \
  X(nvmlDeviceGetComputeRunningProcesses_v3, r510)                    \
  X(nvmlDeviceGetComputeRunningProcesses_v2, r470)                    \
  X(nvmlDeviceGetComputeRunningProcesses, legacy)                     \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, r510)                   \
  X(nvmlDeviceGetGraphicsRunningProcesses_v2, r470)                   \
  X(nvmlDeviceGetGraphicsRunningProcesses, legacy)                    \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3, r510)                 \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v2, r470)                 \
  X(nvmlDeviceGetMPSComputeRunningProcesses, legacy)                  \
  X(nvmlDeviceGetRunningProcessDetailList, current)                   \
  X(nvmlDeviceGetProcessUtilization, legacy)                          \
  X(nvmlDeviceGetPersistenceMode, legacy)                             \
  X(nvmlDeviceGetComputeMode, legacy)                                 \
  X(nvmlDeviceGetDisplayMode, legacy)                                 \
  X(nvmlDeviceGetDisplayActive, legacy)                               \
  X(nvmlDeviceGetDriverModel, legacy)                                 \
  X(nvmlDeviceGetMigMode, r470)                                       \
  X(nvmlDeviceGetUtilizationRates, legacy)                            \
  X(nvmlDeviceGetEncoderUtilization, legacy)                          \
  X(nvmlDeviceGetDecoderUtilization, legacy)                          \
  X(nvmlDeviceGetTemperature, legacy)                                 \
  X(nvmlDeviceGetTemperatureV, current)                               \
  X(nvmlDeviceGetFanSpeed, legacy)                                    \
  X(nvmlDeviceGetFanSpeed_v2, r470)                                   \
  X(nvmlDeviceGetNumFans, r470)                                       \
  X(nvmlDeviceGetPowerUsage, legacy)                                  \
  X(nvmlDeviceGetPowerManagementLimit, legacy)                        \
  X(nvmlDeviceGetEnforcedPowerLimit, legacy)                          \
  X(nvmlDeviceGetClockInfo, legacy)                                   \
  X(nvmlDeviceGetMaxClockInfo, legacy)                                \
  X(nvmlDeviceGetPerformanceState, legacy)                            \
  X(nvmlDeviceGetTotalEccErrors, legacy)                              \
  X(nvmlDeviceGetPcieThroughput, legacy)                              \
  X(nvmlDeviceGetFieldValues, legacy)                                 \
  X(nvmlDeviceGetRemappedRows, r470)                                  \
  X(nvmlDeviceGetRetiredPagesPendingStatus, legacy)                   \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, legacy)                \
  X(nvmlDeviceGetCurrentClocksEventReasons, current)                  \
  X(nvmlDeviceGetCurrPcieLinkGeneration, legacy)                      \
  X(nvmlDeviceGetMaxPcieLinkGeneration, legacy)                       \
  X(nvmlDeviceGetCurrPcieLinkWidth, legacy)                           \
  X(nvmlDeviceGetMaxPcieLinkWidth, legacy)                            \
  X(nvmlDeviceGetGpuFabricInfo, r535_early)                           \
  X(nvmlDeviceIsMigDeviceHandle, r470)                                \
  X(nvmlDeviceGetMaxMigDeviceCount, r470)                             \
  X(nvmlDeviceGetMigDeviceHandleByIndex, r470)                        \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, r470)               \
  X(nvmlDeviceGetGpuInstanceId, r470)                                 \
  X(nvmlDeviceGetComputeInstanceId, r470)
