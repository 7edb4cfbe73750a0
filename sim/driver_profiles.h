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
//   version belongs to the last profile whose firstDriver it reaches (older ones to the first).
//   A profile exports every symbol whose first driver it reaches. v3EntryBytes: bytes per entry
//   the _v3 process lists write (0: the profile has no _v3). Oldest first.
#define GPUGATE_SIM_PROFILES(P)                                                                               \
  P(legacy, "legacy", 319000, 0, "R319-R469: plain entry points and NVML 5.319's _v2 init, count, handles") \
  P(r470, "r470", 470000, 0, "R470-R509: MIG, _v2 process lists (24-byte entries), no _v3, no memory _v2")   \
  P(r510, "r510", 510000, 24, "R510-R535.42: _v3 process lists and memory _v2 added")                        \
  P(r535_early, "r535-early", 535043, 32, "535.43-535.97: _v3 writes 32-byte entries, ConfCompute added")   \
  P(r535, "r535", 535098, 24, "535.98-R579: DetailList added, _v3 back to 24 bytes")                         \
  P(current, "current", 580000, 24, "R580 and later: every function of the R580 header (NVML 13.0)")

// GPUGATE_SIM_CUDA_BRANCH(firstDriver, cudaDriverVersion): the CUDA version a driver branch
// reports (nvmlSystemGetCudaDriverVersion; its major also leads nvmlSystemGetNVMLVersion, as in
// "12.535.104.05"), from NVIDIA's CUDA release notes (the driver each toolkit ships with). A
// scenario that gives only driverVersion gets the versions of its branch. Oldest first.
#define GPUGATE_SIM_CUDA_BRANCHES(B)                                                                       \
  B(319000, 5050) B(331000, 6000) B(340000, 6050) B(346000, 7000) B(352000, 7050) B(367000, 8000)          \
  B(384000, 9000) B(387000, 9010) B(396000, 9020) B(410000, 10000) B(418000, 10010) B(440000, 10020)       \
  B(450000, 11000) B(455000, 11010) B(460000, 11020) B(465000, 11030) B(470000, 11040) B(495000, 11050)    \
  B(510000, 11060) B(515000, 11070) B(520000, 11080) B(525000, 12000) B(530000, 12010) B(535000, 12020)    \
  B(545000, 12030) B(550000, 12040) B(555000, 12050) B(560000, 12060) B(565000, 12070) B(570000, 12080)    \
  B(575000, 12090) B(580000, 13000) B(590000, 13010)

// The first driver of a symbol (major * 1000 + minor) is the first driver branch whose nvml.h
// declares it, read from the header of each CUDA release from 11.0 (R450) to 13.0 (R580); NVML
// 5.319 for the _v2 entry points the header itself dates there. 319000 marks what the oldest
// profile already has and the headers checked cannot date further back; 450000 what the oldest
// header checked (CUDA 11.0) already declares. Two rows follow driver facts rather than the
// header: nvmlDeviceGetRunningProcessDetailList (first exported by 535.98) and
// nvmlDeviceGetCurrentClocksEventReasons / ConfComputeMemSizeInfo (CUDA 12.2's 535.43 on).

// GPUGATE_SIM_SYMBOL(name, firstDriver): every NVML entry point the simulator implements.
#define GPUGATE_SIM_SYMBOLS(X)                                        \
  X(nvmlInit_v2, 319000)                                          \
  X(nvmlInit, 319000)                                             \
  X(nvmlInitWithFlags, 319000)                                    \
  X(nvmlShutdown, 319000)                                         \
  X(nvmlErrorString, 319000)                                      \
  X(nvmlSystemGetDriverVersion, 319000)                           \
  X(nvmlSystemGetNVMLVersion, 319000)                             \
  X(nvmlSystemGetCudaDriverVersion_v2, 450000)                    \
  X(nvmlSystemGetCudaDriverVersion, 319000)                       \
  X(nvmlSystemGetProcessName, 319000)                             \
  X(nvmlDeviceGetCount_v2, 319000)                                \
  X(nvmlDeviceGetCount, 319000)                                   \
  X(nvmlDeviceGetHandleByIndex_v2, 319000)                        \
  X(nvmlDeviceGetHandleByIndex, 319000)                           \
  X(nvmlDeviceGetHandleByUUID, 319000)                            \
  X(nvmlDeviceGetHandleByPciBusId_v2, 319000)                     \
  X(nvmlDeviceGetHandleByPciBusId, 319000)                        \
  X(nvmlDeviceGetName, 319000)                                    \
  X(nvmlDeviceGetUUID, 319000)                                    \
  X(nvmlDeviceGetSerial, 319000)                                  \
  X(nvmlDeviceGetIndex, 319000)                                   \
  X(nvmlDeviceGetMinorNumber, 319000)                             \
  X(nvmlDeviceGetPciInfo_v3, 450000)                              \
  X(nvmlDeviceGetPciInfo_v2, 319000)                              \
  X(nvmlDeviceGetPciInfo, 319000)                                 \
  X(nvmlDeviceGetCudaComputeCapability, 319000)                   \
  X(nvmlDeviceGetMemoryInfo_v2, 510000)                           \
  X(nvmlDeviceGetMemoryInfo, 319000)                              \
  X(nvmlDeviceGetBAR1MemoryInfo, 319000)                          \
  X(nvmlDeviceGetConfComputeMemSizeInfo, 535043)                  \
  X(nvmlDeviceGetComputeRunningProcesses_v3, 510000)              \
  X(nvmlDeviceGetComputeRunningProcesses_v2, 455000)              \
  X(nvmlDeviceGetComputeRunningProcesses, 319000)                 \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, 510000)             \
  X(nvmlDeviceGetGraphicsRunningProcesses_v2, 455000)             \
  X(nvmlDeviceGetGraphicsRunningProcesses, 319000)                \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3, 510000)           \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v2, 470000)           \
  X(nvmlDeviceGetMPSComputeRunningProcesses, 470000)              \
  X(nvmlDeviceGetRunningProcessDetailList, 535098)                \
  X(nvmlDeviceGetProcessUtilization, 319000)                      \
  X(nvmlDeviceGetPersistenceMode, 319000)                         \
  X(nvmlDeviceGetComputeMode, 319000)                             \
  X(nvmlDeviceGetDisplayMode, 319000)                             \
  X(nvmlDeviceGetDisplayActive, 319000)                           \
  X(nvmlDeviceGetDriverModel, 319000)                             \
  X(nvmlDeviceGetMigMode, 450000)                                 \
  X(nvmlDeviceGetUtilizationRates, 319000)                        \
  X(nvmlDeviceGetEncoderUtilization, 319000)                      \
  X(nvmlDeviceGetDecoderUtilization, 319000)                      \
  X(nvmlDeviceGetTemperature, 319000)                             \
  X(nvmlDeviceGetTemperatureV, 570000)                            \
  X(nvmlDeviceGetAddressingMode, 580000)                          \
  X(nvmlDeviceGetFanSpeed, 319000)                                \
  X(nvmlDeviceGetFanSpeed_v2, 450000)                             \
  X(nvmlDeviceGetNumFans, 510000)                                 \
  X(nvmlDeviceGetPowerUsage, 319000)                              \
  X(nvmlDeviceGetPowerManagementLimit, 319000)                    \
  X(nvmlDeviceGetEnforcedPowerLimit, 319000)                      \
  X(nvmlDeviceGetClockInfo, 319000)                               \
  X(nvmlDeviceGetMaxClockInfo, 319000)                            \
  X(nvmlDeviceGetPerformanceState, 319000)                        \
  X(nvmlDeviceGetTotalEccErrors, 319000)                          \
  X(nvmlDeviceGetPcieThroughput, 319000)                          \
  X(nvmlDeviceGetFieldValues, 319000)                             \
  X(nvmlDeviceGetRemappedRows, 450000)                            \
  X(nvmlDeviceGetRetiredPagesPendingStatus, 319000)               \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, 319000)            \
  X(nvmlDeviceGetCurrentClocksEventReasons, 535043)               \
  X(nvmlDeviceGetCurrPcieLinkGeneration, 319000)                  \
  X(nvmlDeviceGetMaxPcieLinkGeneration, 319000)                   \
  X(nvmlDeviceGetCurrPcieLinkWidth, 319000)                       \
  X(nvmlDeviceGetMaxPcieLinkWidth, 319000)                        \
  X(nvmlDeviceGetGpuFabricInfo, 525000)                           \
  X(nvmlDeviceIsMigDeviceHandle, 450000)                          \
  X(nvmlDeviceGetMaxMigDeviceCount, 450000)                       \
  X(nvmlDeviceGetMigDeviceHandleByIndex, 450000)                  \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, 450000)         \
  X(nvmlDeviceGetGpuInstanceId, 450000)                           \
  X(nvmlDeviceGetComputeInstanceId, 450000)

// GPUGATE_SIM_STUB(name, firstDriver): every other function of the R580 header. The simulator
// has nothing to report for them (vGPU, accounting, setters, NvLink, GPM...), so each answers
// NVML_ERROR_NOT_SUPPORTED after the usual init check and faults (sim/exports_stubs.cc); they
// exist because a client linked against the header (go-nvml) cannot start without them.
#define GPUGATE_SIM_STUBS(S)                                          \
  S(nvmlComputeInstanceDestroy, 450000)                           \
  S(nvmlComputeInstanceGetInfo, 450000)                           \
  S(nvmlDeviceClearAccountingPids, 450000)                        \
  S(nvmlDeviceClearCpuAffinity, 450000)                           \
  S(nvmlDeviceClearEccErrorCounts, 450000)                        \
  S(nvmlDeviceCreateGpuInstance, 450000)                          \
  S(nvmlDeviceDiscoverGpus, 450000)                               \
  S(nvmlDeviceFreezeNvLinkUtilizationCounter, 450000)             \
  S(nvmlDeviceGetAccountingBufferSize, 450000)                    \
  S(nvmlDeviceGetAccountingMode, 450000)                          \
  S(nvmlDeviceGetAccountingPids, 450000)                          \
  S(nvmlDeviceGetAccountingStats, 450000)                         \
  S(nvmlDeviceGetActiveVgpus, 450000)                             \
  S(nvmlDeviceGetAPIRestriction, 450000)                          \
  S(nvmlDeviceGetApplicationsClock, 450000)                       \
  S(nvmlDeviceGetArchitecture, 450000)                            \
  S(nvmlDeviceGetAttributes, 450000)                              \
  S(nvmlDeviceGetAutoBoostedClocksEnabled, 450000)                \
  S(nvmlDeviceGetBoardId, 450000)                                 \
  S(nvmlDeviceGetBoardPartNumber, 450000)                         \
  S(nvmlDeviceGetBrand, 450000)                                   \
  S(nvmlDeviceGetBridgeChipInfo, 450000)                          \
  S(nvmlDeviceGetClock, 450000)                                   \
  S(nvmlDeviceGetCpuAffinity, 450000)                             \
  S(nvmlDeviceGetCpuAffinityWithinScope, 450000)                  \
  S(nvmlDeviceGetCreatableVgpus, 450000)                          \
  S(nvmlDeviceGetDefaultApplicationsClock, 450000)                \
  S(nvmlDeviceGetDetailedEccErrors, 450000)                       \
  S(nvmlDeviceGetEccMode, 450000)                                 \
  S(nvmlDeviceGetEncoderCapacity, 450000)                         \
  S(nvmlDeviceGetEncoderSessions, 450000)                         \
  S(nvmlDeviceGetEncoderStats, 450000)                            \
  S(nvmlDeviceGetFBCSessions, 450000)                             \
  S(nvmlDeviceGetFBCStats, 450000)                                \
  S(nvmlDeviceGetGpuInstanceById, 450000)                         \
  S(nvmlDeviceGetGpuInstancePossiblePlacements, 450000)           \
  S(nvmlDeviceGetGpuInstanceProfileInfo, 450000)                  \
  S(nvmlDeviceGetGpuInstanceRemainingCapacity, 450000)            \
  S(nvmlDeviceGetGpuInstances, 450000)                            \
  S(nvmlDeviceGetGpuOperationMode, 450000)                        \
  S(nvmlDeviceGetGridLicensableFeatures, 450000)                  \
  S(nvmlDeviceGetGridLicensableFeatures_v2, 450000)               \
  S(nvmlDeviceGetGridLicensableFeatures_v3, 450000)               \
  S(nvmlDeviceGetHandleBySerial, 450000)                          \
  S(nvmlDeviceGetHostVgpuMode, 450000)                            \
  S(nvmlDeviceGetInforomConfigurationChecksum, 450000)            \
  S(nvmlDeviceGetInforomImageVersion, 450000)                     \
  S(nvmlDeviceGetInforomVersion, 450000)                          \
  S(nvmlDeviceGetMaxCustomerBoostClock, 450000)                   \
  S(nvmlDeviceGetMemoryAffinity, 450000)                          \
  S(nvmlDeviceGetMemoryErrorCounter, 450000)                      \
  S(nvmlDeviceGetMultiGpuBoard, 450000)                           \
  S(nvmlDeviceGetNvLinkCapability, 450000)                        \
  S(nvmlDeviceGetNvLinkErrorCounter, 450000)                      \
  S(nvmlDeviceGetNvLinkRemotePciInfo, 450000)                     \
  S(nvmlDeviceGetNvLinkRemotePciInfo_v2, 450000)                  \
  S(nvmlDeviceGetNvLinkState, 450000)                             \
  S(nvmlDeviceGetNvLinkUtilizationControl, 450000)                \
  S(nvmlDeviceGetNvLinkUtilizationCounter, 450000)                \
  S(nvmlDeviceGetNvLinkVersion, 450000)                           \
  S(nvmlDeviceGetP2PStatus, 450000)                               \
  S(nvmlDeviceGetPcieReplayCounter, 450000)                       \
  S(nvmlDeviceGetPgpuMetadataString, 450000)                      \
  S(nvmlDeviceGetPowerManagementDefaultLimit, 450000)             \
  S(nvmlDeviceGetPowerManagementLimitConstraints, 450000)         \
  S(nvmlDeviceGetPowerManagementMode, 450000)                     \
  S(nvmlDeviceGetPowerState, 450000)                              \
  S(nvmlDeviceGetRetiredPages, 450000)                            \
  S(nvmlDeviceGetRetiredPages_v2, 450000)                         \
  S(nvmlDeviceGetSamples, 450000)                                 \
  S(nvmlDeviceGetSupportedClocksThrottleReasons, 450000)          \
  S(nvmlDeviceGetSupportedEventTypes, 450000)                     \
  S(nvmlDeviceGetSupportedGraphicsClocks, 450000)                 \
  S(nvmlDeviceGetSupportedMemoryClocks, 450000)                   \
  S(nvmlDeviceGetSupportedVgpus, 450000)                          \
  S(nvmlDeviceGetTemperatureThreshold, 450000)                    \
  S(nvmlDeviceGetTopologyCommonAncestor, 450000)                  \
  S(nvmlDeviceGetTopologyNearestGpus, 450000)                     \
  S(nvmlDeviceGetTotalEnergyConsumption, 450000)                  \
  S(nvmlDeviceGetVbiosVersion, 450000)                            \
  S(nvmlDeviceGetVgpuMetadata, 450000)                            \
  S(nvmlDeviceGetVgpuProcessUtilization, 450000)                  \
  S(nvmlDeviceGetVgpuUtilization, 450000)                         \
  S(nvmlDeviceGetViolationStatus, 450000)                         \
  S(nvmlDeviceGetVirtualizationMode, 450000)                      \
  S(nvmlDeviceModifyDrainState, 450000)                           \
  S(nvmlDeviceOnSameBoard, 450000)                                \
  S(nvmlDeviceQueryDrainState, 450000)                            \
  S(nvmlDeviceRegisterEvents, 450000)                             \
  S(nvmlDeviceRemoveGpu, 450000)                                  \
  S(nvmlDeviceRemoveGpu_v2, 450000)                               \
  S(nvmlDeviceResetApplicationsClocks, 450000)                    \
  S(nvmlDeviceResetGpuLockedClocks, 450000)                       \
  S(nvmlDeviceResetNvLinkErrorCounters, 450000)                   \
  S(nvmlDeviceResetNvLinkUtilizationCounter, 450000)              \
  S(nvmlDeviceSetAccountingMode, 450000)                          \
  S(nvmlDeviceSetAPIRestriction, 450000)                          \
  S(nvmlDeviceSetApplicationsClocks, 450000)                      \
  S(nvmlDeviceSetAutoBoostedClocksEnabled, 450000)                \
  S(nvmlDeviceSetComputeMode, 450000)                             \
  S(nvmlDeviceSetCpuAffinity, 450000)                             \
  S(nvmlDeviceSetDefaultAutoBoostedClocksEnabled, 450000)         \
  S(nvmlDeviceSetDriverModel, 450000)                             \
  S(nvmlDeviceSetEccMode, 450000)                                 \
  S(nvmlDeviceSetGpuLockedClocks, 450000)                         \
  S(nvmlDeviceSetGpuOperationMode, 450000)                        \
  S(nvmlDeviceSetMigMode, 450000)                                 \
  S(nvmlDeviceSetNvLinkUtilizationControl, 450000)                \
  S(nvmlDeviceSetPersistenceMode, 450000)                         \
  S(nvmlDeviceSetPowerManagementLimit, 450000)                    \
  S(nvmlDeviceSetVirtualizationMode, 450000)                      \
  S(nvmlDeviceValidateInforom, 450000)                            \
  S(nvmlEventSetCreate, 450000)                                   \
  S(nvmlEventSetFree, 450000)                                     \
  S(nvmlEventSetWait, 450000)                                     \
  S(nvmlEventSetWait_v2, 450000)                                  \
  S(nvmlGetVgpuCompatibility, 450000)                             \
  S(nvmlGetVgpuVersion, 450000)                                   \
  S(nvmlGpuInstanceCreateComputeInstance, 450000)                 \
  S(nvmlGpuInstanceDestroy, 450000)                               \
  S(nvmlGpuInstanceGetComputeInstanceById, 450000)                \
  S(nvmlGpuInstanceGetComputeInstanceProfileInfo, 450000)         \
  S(nvmlGpuInstanceGetComputeInstanceRemainingCapacity, 450000)   \
  S(nvmlGpuInstanceGetComputeInstances, 450000)                   \
  S(nvmlGpuInstanceGetInfo, 450000)                               \
  S(nvmlSetVgpuVersion, 450000)                                   \
  S(nvmlSystemGetHicVersion, 450000)                              \
  S(nvmlSystemGetTopologyGpuSet, 450000)                          \
  S(nvmlUnitGetCount, 450000)                                     \
  S(nvmlUnitGetDevices, 450000)                                   \
  S(nvmlUnitGetFanSpeedInfo, 450000)                              \
  S(nvmlUnitGetHandleByIndex, 450000)                             \
  S(nvmlUnitGetLedState, 450000)                                  \
  S(nvmlUnitGetPsuInfo, 450000)                                   \
  S(nvmlUnitGetTemperature, 450000)                               \
  S(nvmlUnitGetUnitInfo, 450000)                                  \
  S(nvmlUnitSetLedState, 450000)                                  \
  S(nvmlVgpuInstanceClearAccountingPids, 450000)                  \
  S(nvmlVgpuInstanceGetAccountingMode, 450000)                    \
  S(nvmlVgpuInstanceGetAccountingPids, 450000)                    \
  S(nvmlVgpuInstanceGetAccountingStats, 450000)                   \
  S(nvmlVgpuInstanceGetEccMode, 450000)                           \
  S(nvmlVgpuInstanceGetEncoderCapacity, 450000)                   \
  S(nvmlVgpuInstanceGetEncoderSessions, 450000)                   \
  S(nvmlVgpuInstanceGetEncoderStats, 450000)                      \
  S(nvmlVgpuInstanceGetFBCSessions, 450000)                       \
  S(nvmlVgpuInstanceGetFBCStats, 450000)                          \
  S(nvmlVgpuInstanceGetFbUsage, 450000)                           \
  S(nvmlVgpuInstanceGetFrameRateLimit, 450000)                    \
  S(nvmlVgpuInstanceGetLicenseStatus, 450000)                     \
  S(nvmlVgpuInstanceGetMdevUUID, 450000)                          \
  S(nvmlVgpuInstanceGetMetadata, 450000)                          \
  S(nvmlVgpuInstanceGetType, 450000)                              \
  S(nvmlVgpuInstanceGetUUID, 450000)                              \
  S(nvmlVgpuInstanceGetVmDriverVersion, 450000)                   \
  S(nvmlVgpuInstanceGetVmID, 450000)                              \
  S(nvmlVgpuInstanceSetEncoderCapacity, 450000)                   \
  S(nvmlVgpuTypeGetClass, 450000)                                 \
  S(nvmlVgpuTypeGetDeviceID, 450000)                              \
  S(nvmlVgpuTypeGetFramebufferSize, 450000)                       \
  S(nvmlVgpuTypeGetFrameRateLimit, 450000)                        \
  S(nvmlVgpuTypeGetLicense, 450000)                               \
  S(nvmlVgpuTypeGetMaxInstances, 450000)                          \
  S(nvmlVgpuTypeGetMaxInstancesPerVm, 450000)                     \
  S(nvmlVgpuTypeGetName, 450000)                                  \
  S(nvmlVgpuTypeGetNumDisplayHeads, 450000)                       \
  S(nvmlVgpuTypeGetResolution, 450000)                            \
  S(nvmlDeviceGetAttributes_v2, 455000)                           \
  S(nvmlDeviceGetRowRemapperHistogram, 455000)                    \
  S(nvmlVgpuTypeGetGpuInstanceProfileId, 455000)                  \
  S(nvmlComputeInstanceGetInfo_v2, 460000)                        \
  S(nvmlDeviceCreateGpuInstanceWithPlacement, 460000)             \
  S(nvmlDeviceSetTemperatureThreshold, 460000)                    \
  S(nvmlVgpuInstanceGetGpuInstanceId, 460000)                     \
  S(nvmlDeviceResetMemoryLockedClocks, 465000)                    \
  S(nvmlDeviceSetMemoryLockedClocks, 465000)                      \
  S(nvmlGetExcludedDeviceCount, 465000)                           \
  S(nvmlGetExcludedDeviceInfoByIndex, 465000)                     \
  S(nvmlDeviceGetClkMonStatus, 470000)                            \
  S(nvmlDeviceGetGpuInstancePossiblePlacements_v2, 470000)        \
  S(nvmlDeviceGetGridLicensableFeatures_v4, 470000)               \
  S(nvmlDeviceGetNvLinkRemoteDeviceType, 470000)                  \
  S(nvmlDeviceGetBusType, 495000)                                 \
  S(nvmlDeviceGetIrqNum, 495000)                                  \
  S(nvmlVgpuInstanceGetLicenseInfo, 495000)                       \
  S(nvmlDeviceGetAdaptiveClockInfoStatus, 510000)                 \
  S(nvmlDeviceGetGpuInstanceProfileInfoV, 510000)                 \
  S(nvmlDeviceGetMemoryBusWidth, 510000)                          \
  S(nvmlDeviceGetNumGpuCores, 510000)                             \
  S(nvmlDeviceGetPcieLinkMaxSpeed, 510000)                        \
  S(nvmlDeviceGetPowerSource, 510000)                             \
  S(nvmlGpuInstanceGetComputeInstanceProfileInfoV, 510000)        \
  S(nvmlVgpuInstanceGetGpuPciId, 510000)                          \
  S(nvmlVgpuInstanceGetLicenseInfo_v2, 510000)                    \
  S(nvmlDeviceGetDefaultEccMode, 515000)                          \
  S(nvmlDeviceGetDynamicPstatesInfo, 515000)                      \
  S(nvmlDeviceGetGpcClkVfOffset, 515000)                          \
  S(nvmlDeviceGetGspFirmwareMode, 515000)                         \
  S(nvmlDeviceGetGspFirmwareVersion, 515000)                      \
  S(nvmlDeviceGetMinMaxClockOfPState, 515000)                     \
  S(nvmlDeviceGetMinMaxFanSpeed, 515000)                          \
  S(nvmlDeviceGetPcieSpeed, 515000)                               \
  S(nvmlDeviceGetSupportedPerformanceStates, 515000)              \
  S(nvmlDeviceGetThermalSettings, 515000)                         \
  S(nvmlDeviceSetDefaultFanSpeed_v2, 515000)                      \
  S(nvmlDeviceSetFanSpeed_v2, 515000)                             \
  S(nvmlDeviceSetGpcClkVfOffset, 515000)                          \
  S(nvmlVgpuTypeGetCapabilities, 515000)                          \
  S(nvmlDeviceGetGpcClkMinMaxVfOffset, 520000)                    \
  S(nvmlDeviceGetMemClkMinMaxVfOffset, 520000)                    \
  S(nvmlDeviceGetMemClkVfOffset, 520000)                          \
  S(nvmlDeviceGetTargetFanSpeed, 520000)                          \
  S(nvmlDeviceSetMemClkVfOffset, 520000)                          \
  S(nvmlGpmMetricsGet, 520000)                                    \
  S(nvmlGpmQueryDeviceSupport, 520000)                            \
  S(nvmlGpmSampleAlloc, 520000)                                   \
  S(nvmlGpmSampleFree, 520000)                                    \
  S(nvmlGpmSampleGet, 520000)                                     \
  S(nvmlDeviceClearFieldValues, 525000)                           \
  S(nvmlDeviceGetFanControlPolicy_v2, 525000)                     \
  S(nvmlDeviceGetGpuMaxPcieLinkGeneration, 525000)                \
  S(nvmlDeviceGetVgpuCapabilities, 525000)                        \
  S(nvmlDeviceGetVgpuSchedulerCapabilities, 525000)               \
  S(nvmlDeviceGetVgpuSchedulerLog, 525000)                        \
  S(nvmlDeviceGetVgpuSchedulerState, 525000)                      \
  S(nvmlDeviceSetFanControlPolicy, 525000)                        \
  S(nvmlDeviceSetNvLinkDeviceLowPowerThreshold, 525000)           \
  S(nvmlDeviceSetVgpuSchedulerState, 525000)                      \
  S(nvmlGetVgpuDriverCapabilities, 525000)                        \
  S(nvmlGpmMigSampleGet, 525000)                                  \
  S(nvmlGpuInstanceCreateComputeInstanceWithPlacement, 525000)    \
  S(nvmlGpuInstanceGetComputeInstancePossiblePlacements, 525000)  \
  S(nvmlDeviceGetConfComputeGpuAttestationReport, 535000)         \
  S(nvmlDeviceGetConfComputeGpuCertificate, 535000)               \
  S(nvmlDeviceGetConfComputeProtectedMemoryUsage, 535000)         \
  S(nvmlDeviceGetJpgUtilization, 535000)                          \
  S(nvmlDeviceGetModuleId, 535000)                                \
  S(nvmlDeviceGetOfaUtilization, 535000)                          \
  S(nvmlDeviceGetSupportedClocksEventReasons, 535000)             \
  S(nvmlDeviceSetConfComputeUnprotectedMemSize, 535000)           \
  S(nvmlDeviceSetPowerManagementLimit_v2, 535000)                 \
  S(nvmlGpmQueryIfStreamingEnabled, 535000)                       \
  S(nvmlGpmSetStreamingEnabled, 535000)                           \
  S(nvmlSystemGetConfComputeCapabilities, 535000)                 \
  S(nvmlSystemGetConfComputeGpusReadyState, 535000)               \
  S(nvmlSystemGetConfComputeState, 535000)                        \
  S(nvmlSystemGetNvlinkBwMode, 535000)                            \
  S(nvmlSystemSetConfComputeGpusReadyState, 535000)               \
  S(nvmlSystemSetNvlinkBwMode, 535000)                            \
  S(nvmlDeviceGetC2cModeInfoV, 545000)                            \
  S(nvmlDeviceGetLastBBXFlushTime, 545000)                        \
  S(nvmlDeviceGetGpuFabricInfoV, 550000)                          \
  S(nvmlDeviceGetNumaNodeId, 550000)                              \
  S(nvmlDeviceGetPciInfoExt, 550000)                              \
  S(nvmlDeviceGetProcessesUtilizationInfo, 550000)                \
  S(nvmlDeviceGetSramEccErrorStatus, 550000)                      \
  S(nvmlDeviceGetVgpuHeterogeneousMode, 550000)                   \
  S(nvmlDeviceGetVgpuInstancesUtilizationInfo, 550000)            \
  S(nvmlDeviceGetVgpuProcessesUtilizationInfo, 550000)            \
  S(nvmlDeviceGetVgpuTypeCreatablePlacements, 550000)             \
  S(nvmlDeviceGetVgpuTypeSupportedPlacements, 550000)             \
  S(nvmlDeviceSetVgpuCapabilities, 550000)                        \
  S(nvmlDeviceSetVgpuHeterogeneousMode, 550000)                   \
  S(nvmlSystemGetConfComputeKeyRotationThresholdInfo, 550000)     \
  S(nvmlSystemGetConfComputeSettings, 550000)                     \
  S(nvmlSystemSetConfComputeKeyRotationThresholdInfo, 550000)     \
  S(nvmlVgpuInstanceGetPlacementId, 550000)                       \
  S(nvmlVgpuTypeGetFbReservation, 550000)                         \
  S(nvmlVgpuTypeGetGspHeapSize, 550000)                           \
  S(nvmlDeviceGetCapabilities, 555000)                            \
  S(nvmlDeviceGetClockOffsets, 555000)                            \
  S(nvmlDeviceGetDriverModel_v2, 555000)                          \
  S(nvmlDeviceSetClockOffsets, 555000)                            \
  S(nvmlSystemGetDriverBranch, 560000)                            \
  S(nvmlVgpuTypeGetBAR1Info, 560000)                              \
  S(nvmlDeviceGetCoolerInfo, 570000)                              \
  S(nvmlDeviceGetCurrentClockFreqs, 570000)                       \
  S(nvmlDeviceGetDramEncryptionMode, 570000)                      \
  S(nvmlDeviceGetFanSpeedRPM, 570000)                             \
  S(nvmlDeviceGetMarginTemperature, 570000)                       \
  S(nvmlDeviceGetNvlinkBwMode, 570000)                            \
  S(nvmlDeviceGetNvlinkSupportedBwModes, 570000)                  \
  S(nvmlDeviceGetPerformanceModes, 570000)                        \
  S(nvmlDeviceGetPlatformInfo, 570000)                            \
  S(nvmlDevicePowerSmoothingActivatePresetProfile, 570000)        \
  S(nvmlDevicePowerSmoothingSetState, 570000)                     \
  S(nvmlDevicePowerSmoothingUpdatePresetProfileParam, 570000)     \
  S(nvmlDeviceSetDramEncryptionMode, 570000)                      \
  S(nvmlDeviceSetNvlinkBwMode, 570000)                            \
  S(nvmlDeviceWorkloadPowerProfileClearRequestedProfiles, 570000) \
  S(nvmlDeviceWorkloadPowerProfileGetCurrentProfiles, 570000)     \
  S(nvmlDeviceWorkloadPowerProfileGetProfilesInfo, 570000)        \
  S(nvmlDeviceWorkloadPowerProfileSetRequestedProfiles, 570000)   \
  S(nvmlVgpuInstanceGetRuntimeStateSize, 570000)                  \
  S(nvmlDeviceGetHandleByUUIDV, 575000)                           \
  S(nvmlGpuInstanceGetActiveVgpus, 575000)                        \
  S(nvmlGpuInstanceGetCreatableVgpus, 575000)                     \
  S(nvmlGpuInstanceGetVgpuHeterogeneousMode, 575000)              \
  S(nvmlGpuInstanceGetVgpuSchedulerLog, 575000)                   \
  S(nvmlGpuInstanceGetVgpuSchedulerState, 575000)                 \
  S(nvmlGpuInstanceGetVgpuTypeCreatablePlacements, 575000)        \
  S(nvmlGpuInstanceSetVgpuHeterogeneousMode, 575000)              \
  S(nvmlGpuInstanceSetVgpuSchedulerState, 575000)                 \
  S(nvmlSystemEventSetCreate, 575000)                             \
  S(nvmlSystemEventSetFree, 575000)                               \
  S(nvmlSystemEventSetWait, 575000)                               \
  S(nvmlSystemRegisterEvents, 575000)                             \
  S(nvmlVgpuTypeGetMaxInstancesPerGpuInstance, 575000)            \
  S(nvmlDeviceGetGpuInstanceProfileInfoByIdV, 580000)             \
  S(nvmlDeviceGetNvLinkInfo, 580000)                              \
  S(nvmlDeviceGetPdi, 580000)                                     \
  S(nvmlDeviceGetPowerMizerMode_v1, 580000)                       \
  S(nvmlDeviceGetRepairStatus, 580000)                            \
  S(nvmlDeviceGetSramUniqueUncorrectedEccErrorCounts, 580000)     \
  S(nvmlDeviceReadWritePRM_v1, 580000)                            \
  S(nvmlDeviceSetPowerMizerMode_v1, 580000)
