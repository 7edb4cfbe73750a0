// The table of NVML entry points gpugate resolves with dlsym (see symbols.h).
#include "symbols.h"

#include <dlfcn.h>

#include <initializer_list>
#include <vector>

namespace gpugate {

namespace {

struct LogicalFunction {
  Fn fn;
  const char* logical;
  bool required;
  std::vector<SymbolCandidate> candidates;  // newest first
};

const std::vector<LogicalFunction>& Functions() {
  static const std::vector<LogicalFunction> functions = {
      {kInit, "init", true, {{"nvmlInit_v2", 2}, {"nvmlInit", 1}}},
      {kShutdown, "shutdown", true, {{"nvmlShutdown", 1}}},
      {kErrorString, "errorString", false, {{"nvmlErrorString", 1}}},
      {kSystemGetDriverVersion, "systemGetDriverVersion", false, {{"nvmlSystemGetDriverVersion", 1}}},
      {kSystemGetNvmlVersion, "systemGetNvmlVersion", false, {{"nvmlSystemGetNVMLVersion", 1}}},
      {kSystemGetCudaDriverVersion,
       "systemGetCudaDriverVersion",
       false,
       {{"nvmlSystemGetCudaDriverVersion_v2", 2}, {"nvmlSystemGetCudaDriverVersion", 1}}},
      {kDeviceGetCount, "deviceGetCount", true, {{"nvmlDeviceGetCount_v2", 2}, {"nvmlDeviceGetCount", 1}}},
      {kDeviceGetHandleByIndex,
       "deviceGetHandleByIndex",
       true,
       {{"nvmlDeviceGetHandleByIndex_v2", 2}, {"nvmlDeviceGetHandleByIndex", 1}}},
      {kDeviceGetName, "deviceGetName", false, {{"nvmlDeviceGetName", 1}}},
      {kDeviceGetUuid, "deviceGetUUID", false, {{"nvmlDeviceGetUUID", 1}}},
      {kDeviceGetMinorNumber, "deviceGetMinorNumber", false, {{"nvmlDeviceGetMinorNumber", 1}}},
      {kDeviceGetPciInfo,
       "deviceGetPciInfo",
       false,
       {{"nvmlDeviceGetPciInfo_v3", 3}, {"nvmlDeviceGetPciInfo_v2", 2}, {"nvmlDeviceGetPciInfo", 1}}},
      {kDeviceGetCudaComputeCapability,
       "deviceGetCudaComputeCapability",
       false,
       {{"nvmlDeviceGetCudaComputeCapability", 1}}},
      {kDeviceGetFieldValues, "deviceGetFieldValues", false, {{"nvmlDeviceGetFieldValues", 1}}},
      {kDeviceGetMemoryInfo,
       "deviceGetMemoryInfo",
       false,
       {{"nvmlDeviceGetMemoryInfo_v2", 2}, {"nvmlDeviceGetMemoryInfo", 1}}},
      {kDeviceGetMemoryInfoV1, "deviceGetMemoryInfoV1", false, {{"nvmlDeviceGetMemoryInfo", 1}}},
      {kDeviceGetComputeRunningProcesses,
       "deviceGetComputeRunningProcesses",
       false,
       {{"nvmlDeviceGetComputeRunningProcesses_v3", 3},
        {"nvmlDeviceGetComputeRunningProcesses_v2", 2},
        {"nvmlDeviceGetComputeRunningProcesses", 1}}},
      {kDeviceGetGraphicsRunningProcesses,
       "deviceGetGraphicsRunningProcesses",
       false,
       {{"nvmlDeviceGetGraphicsRunningProcesses_v3", 3},
        {"nvmlDeviceGetGraphicsRunningProcesses_v2", 2},
        {"nvmlDeviceGetGraphicsRunningProcesses", 1}}},
      {kDeviceGetMpsComputeRunningProcesses,
       "deviceGetMPSComputeRunningProcesses",
       false,
       {{"nvmlDeviceGetMPSComputeRunningProcesses_v3", 3},
        {"nvmlDeviceGetMPSComputeRunningProcesses_v2", 2},
        {"nvmlDeviceGetMPSComputeRunningProcesses", 1}}},
      {kDeviceGetPersistenceMode, "deviceGetPersistenceMode", false, {{"nvmlDeviceGetPersistenceMode", 1}}},
      {kDeviceGetComputeMode, "deviceGetComputeMode", false, {{"nvmlDeviceGetComputeMode", 1}}},
      {kDeviceGetMigMode, "deviceGetMigMode", false, {{"nvmlDeviceGetMigMode", 1}}},
      {kDeviceGetUtilizationRates, "deviceGetUtilizationRates", false, {{"nvmlDeviceGetUtilizationRates", 1}}},
      {kDeviceGetTemperature, "deviceGetTemperature", false, {{"nvmlDeviceGetTemperature", 1}}},
      {kDeviceGetPowerUsage, "deviceGetPowerUsage", false, {{"nvmlDeviceGetPowerUsage", 1}}},
      {kDeviceGetMaxMigDeviceCount, "deviceGetMaxMigDeviceCount", false, {{"nvmlDeviceGetMaxMigDeviceCount", 1}}},
      {kDeviceGetMigDeviceHandleByIndex,
       "deviceGetMigDeviceHandleByIndex",
       false,
       {{"nvmlDeviceGetMigDeviceHandleByIndex", 1}}},
      {kDeviceGetGpuInstanceId, "deviceGetGpuInstanceId", false, {{"nvmlDeviceGetGpuInstanceId", 1}}},
      {kDeviceGetComputeInstanceId, "deviceGetComputeInstanceId", false, {{"nvmlDeviceGetComputeInstanceId", 1}}},
      {kDeviceGetRemappedRows, "deviceGetRemappedRows", false, {{"nvmlDeviceGetRemappedRows", 1}}},
      {kDeviceGetTotalEccErrors, "deviceGetTotalEccErrors", false, {{"nvmlDeviceGetTotalEccErrors", 1}}},
      {kDeviceGetRetiredPagesPendingStatus,
       "deviceGetRetiredPagesPendingStatus",
       false,
       {{"nvmlDeviceGetRetiredPagesPendingStatus", 1}}},
      // Renamed in R535: same signature, same bits.
      {kDeviceGetClocksEventReasons,
       "deviceGetCurrentClocksEventReasons",
       false,
       {{"nvmlDeviceGetCurrentClocksEventReasons", 2}, {"nvmlDeviceGetCurrentClocksThrottleReasons", 1}}},
      {kDeviceGetCurrPcieLinkGeneration, "deviceGetCurrPcieLinkGeneration", false, {{"nvmlDeviceGetCurrPcieLinkGeneration", 1}}},
      {kDeviceGetMaxPcieLinkGeneration, "deviceGetMaxPcieLinkGeneration", false, {{"nvmlDeviceGetMaxPcieLinkGeneration", 1}}},
      {kDeviceGetCurrPcieLinkWidth, "deviceGetCurrPcieLinkWidth", false, {{"nvmlDeviceGetCurrPcieLinkWidth", 1}}},
      {kDeviceGetMaxPcieLinkWidth, "deviceGetMaxPcieLinkWidth", false, {{"nvmlDeviceGetMaxPcieLinkWidth", 1}}},
      {kDeviceGetGpuFabricInfo, "deviceGetGpuFabricInfo", false, {{"nvmlDeviceGetGpuFabricInfo", 1}}},
      {kSimLastError, "simulatorLastError", false, {{"gpugateSimLastError", 1}}},
  };
  return functions;
}

const LogicalFunction& Lookup(Fn fn) {
  for (const LogicalFunction& function : Functions()) {
    if (function.fn == fn) return function;
  }
  return Functions().front();  // unreachable: every Fn has a row (checked by the export contract test)
}

}  // namespace

const char* LogicalName(Fn fn) { return Lookup(fn).logical; }
const char* PreferredSymbol(Fn fn) { return Lookup(fn).candidates.front().symbol; }
bool IsRequired(Fn fn) { return Lookup(fn).required; }

Fn BindSymbols(void* library, SymbolTable* table) {
  Fn firstMissing = kFnCount;
  for (const LogicalFunction& function : Functions()) {
    const int i = function.fn;
    for (const SymbolCandidate& candidate : function.candidates) {
      void* pointer = dlsym(library, candidate.symbol);
      if (pointer != nullptr) {
        table->pointer[i] = pointer;
        table->bound[i] = &candidate;
        break;
      }
    }
    if (table->pointer[i] == nullptr && function.required && firstMissing == kFnCount) {
      firstMissing = static_cast<Fn>(i);
    }
  }
  return firstMissing;
}

}  // namespace gpugate
