// The table of NVML entry points gpugate resolves with dlsym.
//
// Each logical function lists its exported candidates newest first, each tagged with the ABI
// version of the struct it takes (the plain exported names are the oldest ABI: plain
// nvmlDeviceGetComputeRunningProcesses fills 16-byte entries). The table records which
// candidate bound, so callers pair the pointer with its own struct and users can see the
// variant. A missing required function fails the open with NVML_ERROR_FUNCTION_NOT_FOUND;
// a missing optional one leaves the fields it serves null with that error.
#pragma once

#include <atomic>
#include <string>

#include "nvml_abi.h"

namespace gpugate {

enum Fn : int {
  kInit,
  kShutdown,
  kErrorString,
  kSystemGetDriverVersion,
  kSystemGetNvmlVersion,
  kSystemGetCudaDriverVersion,
  kDeviceGetCount,
  kDeviceGetHandleByIndex,
  kDeviceGetName,
  kDeviceGetUuid,
  kDeviceGetMinorNumber,
  kDeviceGetPciInfo,
  kDeviceGetCudaComputeCapability,
  kDeviceGetFieldValues,  // read once at open, for the recovery action (field 230)
  kDeviceGetMemoryInfo,
  kDeviceGetMemoryInfoV1,  // the v1 query, kept as a fallback when the _v2 query is refused
  kDeviceGetComputeRunningProcesses,
  kDeviceGetGraphicsRunningProcesses,
  kDeviceGetMpsComputeRunningProcesses,
  kDeviceGetPersistenceMode,
  kDeviceGetComputeMode,
  kDeviceGetMigMode,
  kDeviceGetUtilizationRates,
  kDeviceGetTemperature,
  kDeviceGetPowerUsage,
  kDeviceGetMaxMigDeviceCount,
  kDeviceGetMigDeviceHandleByIndex,
  kDeviceGetGpuInstanceId,
  kDeviceGetComputeInstanceId,
  // Health readings (health.cc), read only on request, never by a snapshot.
  kDeviceGetRemappedRows,
  kDeviceGetTotalEccErrors,
  kDeviceGetRetiredPagesPendingStatus,
  kDeviceGetClocksEventReasons,
  kDeviceGetCurrPcieLinkGeneration,
  kDeviceGetMaxPcieLinkGeneration,
  kDeviceGetCurrPcieLinkWidth,
  kDeviceGetMaxPcieLinkWidth,
  kDeviceGetGpuFabricInfo,
  kSimLastError,  // gpugateSimLastError: only the simulator exports it
  kFnCount,
};

struct SymbolCandidate {
  const char* symbol;
  int abi;  // version of the struct / calling convention this symbol takes (3, 2, 1)
};

struct SymbolTable {
  void* pointer[kFnCount] = {};
  const SymbolCandidate* bound[kFnCount] = {};
  // The function most recently fetched for a call, and the device being read: when a call
  // never returns, these say where it is stuck (read from another thread after a deadline).
  mutable std::atomic<int> lastFn{-1};
  mutable std::atomic<int> lastDevice{-1};
  // Told of every call right before it is made (the helper process writes it into its command
  // line); null in the addon. Set before the first call, never changed while calls run.
  void (*callObserver)(const SymbolTable& table, int fn) = nullptr;

  bool Has(Fn fn) const { return pointer[fn] != nullptr; }
  int Abi(Fn fn) const { return bound[fn] != nullptr ? bound[fn]->abi : 0; }
  const char* Symbol(Fn fn) const { return bound[fn] != nullptr ? bound[fn]->symbol : nullptr; }
  // The pointer to call; every NVML call site fetches it here right before calling.
  template <typename T>
  T Get(Fn fn) const {
    lastFn.store(fn, std::memory_order_relaxed);
    if (callObserver != nullptr) callObserver(*this, fn);
    return reinterpret_cast<T>(pointer[fn]);
  }
  void Reading(int device) const { lastDevice.store(device, std::memory_order_relaxed); }
};

// The logical name users see in library.variants (e.g. "getComputeRunningProcesses").
const char* LogicalName(Fn fn);
// The newest candidate's symbol: the function named in errors when nothing bound.
const char* PreferredSymbol(Fn fn);
bool IsRequired(Fn fn);

// Resolves every function; returns the first required function that did not bind, or kFnCount.
Fn BindSymbols(void* library, SymbolTable* table);

}  // namespace gpugate
