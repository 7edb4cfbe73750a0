// What gpugate reads from NVML, per session and per snapshot (see queries.h).
#include "queries.h"

#include <cstdio>
#include <cstring>

#include "errors.h"
#include "process_list.h"

namespace gpugate {

namespace {

std::string CString(const char* buffer, size_t size) { return std::string(buffer, strnlen(buffer, size)); }

// Reads one device string (name, UUID) into a buffer of the documented size.
nvmlReturn_t ReadString(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, size_t size, std::string* out) {
  std::vector<char> buffer(size, '\0');
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetString_fn>(fn)(device, buffer.data(), static_cast<unsigned>(size));
  if (code == NVML_SUCCESS) *out = CString(buffer.data(), size);
  return code;
}

nvmlReturn_t ReadPciBusId(const SymbolTable& symbols, nvmlDevice_t device, std::string* out) {
  nvmlPciInfo_t info;
  std::memset(&info, 0, sizeof info);
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetPciInfo_fn>(kDeviceGetPciInfo)(device, &info);
  if (code != NVML_SUCCESS) return code;
  if (symbols.Abi(kDeviceGetPciInfo) >= 3 && info.busId[0] != '\0') {
    *out = CString(info.busId, sizeof info.busId);
  } else {
    // Older layouts hold a 16-byte legacy id first; domain/bus/device sit at the same offsets
    // in every layout, so build the canonical 8-digit-domain form from them.
    char text[GPUGATE_NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    std::snprintf(text, sizeof text, "%08X:%02X:%02X.0", info.domain, info.bus, info.device);
    *out = text;
  }
  return NVML_SUCCESS;
}

// Records a field failure; returns true when it is a device-level failure (stop reading).
bool Fail(const SymbolTable& symbols, DeviceReading* reading, const char* field, Fn fn, nvmlReturn_t code) {
  if (IsDeviceLevelFailure(code)) {
    reading->hasError = true;
    reading->error = MakeCallError(symbols, field, fn, code);
    return true;
  }
  reading->fieldErrors.push_back(MakeCallError(symbols, field, fn, code));
  return false;
}

// One NVML query of a snapshot: the field a failure is reported under, the function, and how a
// success fills the reading (called only when the function is bound).
struct DeviceQuery {
  const char* field;
  Fn fn;
  nvmlReturn_t (*fill)(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, DeviceReading* reading);
};

template <double DeviceReading::*figure>
nvmlReturn_t FillUInt(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, DeviceReading* reading) {
  unsigned value = 0;
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetUInt_fn>(fn)(device, &value);
  if (code == NVML_SUCCESS) reading->*figure = value;
  return code;
}

nvmlReturn_t FillMigMode(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, DeviceReading* reading) {
  unsigned current = 0, pending = 0;
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetMigMode_fn>(fn)(device, &current, &pending);
  if (code == NVML_SUCCESS) reading->migMode = current;
  return code;
}

nvmlReturn_t FillUtilization(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, DeviceReading* reading) {
  nvmlUtilization_t utilization{0, 0};
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetUtilizationRates_fn>(fn)(device, &utilization);
  if (code == NVML_SUCCESS) {
    reading->utilizationGpuPercent = utilization.gpu;
    reading->utilizationMemoryPercent = utilization.memory;
  }
  return code;
}

nvmlReturn_t FillTemperature(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, DeviceReading* reading) {
  unsigned celsius = 0;
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetTemperature_fn>(fn)(device, GPUGATE_NVML_TEMPERATURE_GPU, &celsius);
  if (code == NVML_SUCCESS) reading->temperatureC = celsius;
  return code;
}

// The queries the figure table (GPUGATE_DEVICE_FIGURES in readings.h) names. The field names are
// what a CallError reports (and TypeScript shows): they predate the wire names and stay as they are.
constexpr DeviceQuery kPersistenceModeQuery = {"persistenceMode", kDeviceGetPersistenceMode,
                                               FillUInt<&DeviceReading::persistenceMode>};
constexpr DeviceQuery kComputeModeQuery = {"computeMode", kDeviceGetComputeMode, FillUInt<&DeviceReading::computeMode>};
constexpr DeviceQuery kMigModeQuery = {"migMode", kDeviceGetMigMode, FillMigMode};
constexpr DeviceQuery kUtilizationQuery = {"utilization", kDeviceGetUtilizationRates, FillUtilization};
constexpr DeviceQuery kTemperatureQuery = {"temperatureC", kDeviceGetTemperature, FillTemperature};
constexpr DeviceQuery kPowerQuery = {"powerWatts", kDeviceGetPowerUsage, FillUInt<&DeviceReading::powerMilliwatts>};

// The figures' queries in read order, one entry per figure (a query filling two figures twice).
#define GPUGATE_FIGURE_QUERY(member, slot, wireName, query) &query,
constexpr const DeviceQuery* kFigureQueries[] = {GPUGATE_DEVICE_FIGURES(GPUGATE_FIGURE_QUERY)};
#undef GPUGATE_FIGURE_QUERY

// Runs one query; returns false when the device is lost (stop reading it).
bool RunQuery(const SymbolTable& symbols, const DeviceQuery& query, nvmlDevice_t device, DeviceReading* reading) {
  nvmlReturn_t code =
      symbols.Has(query.fn) ? query.fill(symbols, query.fn, device, reading) : NVML_ERROR_FUNCTION_NOT_FOUND;
  return code == NVML_SUCCESS || !Fail(symbols, reading, query.field, query.fn, code);
}

void ReadMig(const SymbolTable& symbols, nvmlDevice_t parent, const SnapshotRequest& request, DeviceReading* reading) {
  if (!symbols.Has(kDeviceGetMaxMigDeviceCount) || !symbols.Has(kDeviceGetMigDeviceHandleByIndex)) {
    Fn missing = symbols.Has(kDeviceGetMaxMigDeviceCount) ? kDeviceGetMigDeviceHandleByIndex : kDeviceGetMaxMigDeviceCount;
    Fail(symbols, reading, "migDevices", missing, NVML_ERROR_FUNCTION_NOT_FOUND);
    return;
  }
  unsigned maxCount = 0;
  nvmlReturn_t code = symbols.Get<nvmlDeviceGetUInt_fn>(kDeviceGetMaxMigDeviceCount)(parent, &maxCount);
  if (code != NVML_SUCCESS) {
    Fail(symbols, reading, "migDevices", kDeviceGetMaxMigDeviceCount, code);
    return;
  }
  reading->migListed = true;
  bool slotErrorRecorded = false;
  for (unsigned slot = 0; slot < maxCount; ++slot) {
    nvmlDevice_t mig = nullptr;
    code = symbols.Get<nvmlDeviceGetMigDeviceHandleByIndex_fn>(kDeviceGetMigDeviceHandleByIndex)(parent, slot, &mig);
    if (code == NVML_ERROR_NOT_FOUND) continue;  // a hole: later slots may still exist
    if (code != NVML_SUCCESS) {
      // A lost parent is a device failure, as for every other field; anything else marks the list.
      if (IsDeviceLevelFailure(code)) {
        Fail(symbols, reading, "migDevices", kDeviceGetMigDeviceHandleByIndex, code);
        return;
      }
      if (!slotErrorRecorded) reading->fieldErrors.push_back(MakeCallError(symbols, "migDevices", kDeviceGetMigDeviceHandleByIndex, code));
      slotErrorRecorded = true;
      continue;
    }
    MigReading entry;
    entry.slot = slot;
    auto failEntry = [&](Fn fn, nvmlReturn_t failure, const char* field) {
      if (!entry.hasError) {
        entry.hasError = true;
        entry.error = MakeCallError(symbols, field, fn, failure);
      }
    };
    if (symbols.Has(kDeviceGetUuid)) {
      code = ReadString(symbols, kDeviceGetUuid, mig, GPUGATE_NVML_DEVICE_UUID_BUFFER_SIZE, &entry.uuid);
      if (code != NVML_SUCCESS) failEntry(kDeviceGetUuid, code, "uuid");
    }
    unsigned id = 0;
    if (symbols.Has(kDeviceGetGpuInstanceId)) {
      code = symbols.Get<nvmlDeviceGetUInt_fn>(kDeviceGetGpuInstanceId)(mig, &id);
      if (code == NVML_SUCCESS) entry.gpuInstanceId = id; else failEntry(kDeviceGetGpuInstanceId, code, "gpuInstanceId");
    }
    if (symbols.Has(kDeviceGetComputeInstanceId)) {
      code = symbols.Get<nvmlDeviceGetUInt_fn>(kDeviceGetComputeInstanceId)(mig, &id);
      if (code == NVML_SUCCESS) entry.computeInstanceId = id; else failEntry(kDeviceGetComputeInstanceId, code, "computeInstanceId");
    }
    Fn failedFn = kDeviceGetMemoryInfo;
    code = ReadMemory(symbols, mig, &entry.memory, &failedFn);
    if (code != NVML_SUCCESS) failEntry(failedFn, code, "memory");
    if (request.processes) {
      std::vector<CallError> errors;
      ProcessListOutcome outcome =
          ReadProcessLists(symbols, mig, entry.memory.usedBytes, entry.memory.totalBytes, &entry.processes, &errors);
      if (outcome.deviceLost) {
        failEntry(kDeviceGetComputeRunningProcesses, outcome.lostError.code, "processes");
      } else if (!entry.processes.read && !errors.empty() && !entry.hasError) {
        entry.hasError = true;
        entry.error = errors.front();
      }
    }
    reading->migDevices.push_back(std::move(entry));
  }
}

}  // namespace

nvmlReturn_t ReadMemory(const SymbolTable& symbols, nvmlDevice_t device, MemoryReading* out, Fn* failedFn) {
  *out = MemoryReading{};
  nvmlReturn_t code = NVML_ERROR_FUNCTION_NOT_FOUND;
  *failedFn = kDeviceGetMemoryInfo;
  if (symbols.Abi(kDeviceGetMemoryInfo) == 2) {
    nvmlMemory_v2_t memory;
    std::memset(&memory, 0, sizeof memory);
    memory.version = GPUGATE_NVML_MEMORY_V2_VERSION;
    code = symbols.Get<nvmlDeviceGetMemoryInfo_v2_fn>(kDeviceGetMemoryInfo)(device, &memory);
    if (code == NVML_SUCCESS) {
      out->source = 2;
      out->totalBytes = static_cast<double>(memory.total);
      out->freeBytes = static_cast<double>(memory.free);
      out->usedBytes = static_cast<double>(memory.used);
      out->reservedBytes = static_cast<double>(memory.reserved);
      return code;
    }
    // A library that refuses the v2 struct still answers the v1 query.
    const bool refused = code == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || code == NVML_ERROR_NOT_SUPPORTED ||
                         code == NVML_ERROR_FUNCTION_NOT_FOUND || code == NVML_ERROR_INVALID_ARGUMENT;
    if (!refused || !symbols.Has(kDeviceGetMemoryInfoV1)) return code;
  }
  if (symbols.Has(kDeviceGetMemoryInfoV1)) {
    *failedFn = kDeviceGetMemoryInfoV1;
    nvmlMemory_v1_t memory;
    std::memset(&memory, 0, sizeof memory);
    code = symbols.Get<nvmlDeviceGetMemoryInfo_v1_fn>(kDeviceGetMemoryInfoV1)(device, &memory);
    if (code == NVML_SUCCESS) {
      out->source = 1;
      out->totalBytes = static_cast<double>(memory.total);
      out->freeBytes = static_cast<double>(memory.free);
      out->usedBytes = static_cast<double>(memory.used);
    }
  }
  return code;
}

DeviceIdentity ReadIdentity(const SymbolTable& symbols, unsigned index) {
  symbols.Reading(static_cast<int>(index));
  DeviceIdentity identity;
  identity.index = index;
  nvmlReturn_t code =
      symbols.Get<nvmlDeviceGetHandleByIndex_fn>(kDeviceGetHandleByIndex)(index, &identity.handle);
  if (code != NVML_SUCCESS) {
    identity.handle = nullptr;
    identity.hasError = true;
    identity.error = MakeCallError(symbols, "handle", kDeviceGetHandleByIndex, code);
    return identity;
  }
  auto fieldError = [&](const char* field, Fn fn, nvmlReturn_t failure) {
    identity.fieldErrors.push_back(MakeCallError(symbols, field, fn, failure));
  };
  nvmlDevice_t device = identity.handle;
  if (!symbols.Has(kDeviceGetName)) fieldError("name", kDeviceGetName, NVML_ERROR_FUNCTION_NOT_FOUND);
  else if ((code = ReadString(symbols, kDeviceGetName, device, GPUGATE_NVML_DEVICE_NAME_BUFFER_SIZE, &identity.name)) != NVML_SUCCESS)
    fieldError("name", kDeviceGetName, code);
  if (!symbols.Has(kDeviceGetUuid)) fieldError("uuid", kDeviceGetUuid, NVML_ERROR_FUNCTION_NOT_FOUND);
  else if ((code = ReadString(symbols, kDeviceGetUuid, device, GPUGATE_NVML_DEVICE_UUID_BUFFER_SIZE, &identity.uuid)) != NVML_SUCCESS)
    fieldError("uuid", kDeviceGetUuid, code);
  if (!symbols.Has(kDeviceGetPciInfo)) fieldError("pciBusId", kDeviceGetPciInfo, NVML_ERROR_FUNCTION_NOT_FOUND);
  else if ((code = ReadPciBusId(symbols, device, &identity.pciBusId)) != NVML_SUCCESS)
    fieldError("pciBusId", kDeviceGetPciInfo, code);
  if (!symbols.Has(kDeviceGetMinorNumber)) {
    fieldError("minorNumber", kDeviceGetMinorNumber, NVML_ERROR_FUNCTION_NOT_FOUND);
  } else {
    unsigned minor = 0;
    code = symbols.Get<nvmlDeviceGetUInt_fn>(kDeviceGetMinorNumber)(device, &minor);
    if (code == NVML_SUCCESS) identity.minorNumber = minor; else fieldError("minorNumber", kDeviceGetMinorNumber, code);
  }
  if (!symbols.Has(kDeviceGetCudaComputeCapability)) {
    fieldError("computeCapability", kDeviceGetCudaComputeCapability, NVML_ERROR_FUNCTION_NOT_FOUND);
  } else {
    int major = 0, minor = 0;
    code = symbols.Get<nvmlDeviceGetCudaComputeCapability_fn>(kDeviceGetCudaComputeCapability)(device, &major, &minor);
    if (code == NVML_SUCCESS) {
      identity.computeCapabilityMajor = major;
      identity.computeCapabilityMinor = minor;
    } else {
      fieldError("computeCapability", kDeviceGetCudaComputeCapability, code);
    }
  }
  // The recovery action changes only with an Xid 154 that needs operator action, so it is read
  // once here and not per poll. Drivers before r570 have no such field: it stays unknown.
  if (!symbols.Has(kDeviceGetFieldValues)) {
    fieldError("recoveryAction", kDeviceGetFieldValues, NVML_ERROR_FUNCTION_NOT_FOUND);
  } else {
    nvmlFieldValue_t field;
    std::memset(&field, 0, sizeof field);
    field.fieldId = GPUGATE_NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
    code = symbols.Get<nvmlDeviceGetFieldValues_fn>(kDeviceGetFieldValues)(device, 1, &field);
    if (code == NVML_SUCCESS) code = field.nvmlReturn;
    if (code == NVML_SUCCESS) identity.recoveryAction = field.value.asUInt;
    else fieldError("recoveryAction", kDeviceGetFieldValues, code);
  }
  return identity;
}

DeviceReading ReadDevice(const SymbolTable& symbols, const DeviceIdentity& identity, const SnapshotRequest& request) {
  symbols.Reading(static_cast<int>(identity.index));
  DeviceReading reading;
  reading.index = identity.index;
  if (identity.hasError) {
    reading.hasError = true;
    reading.error = identity.error;
    return reading;
  }
  nvmlDevice_t device = identity.handle;
  Fn failedFn = kDeviceGetMemoryInfo;
  nvmlReturn_t code = ReadMemory(symbols, device, &reading.memory, &failedFn);
  if (code != NVML_SUCCESS && Fail(symbols, &reading, "memory", failedFn, code)) return reading;

  if (request.memoryOnly && request.computeMode) {
    if (!RunQuery(symbols, kComputeModeQuery, device, &reading)) return reading;
  }
  if (!request.memoryOnly) {
    const DeviceQuery* previous = nullptr;
    for (const DeviceQuery* query : kFigureQueries) {
      if (query == previous) continue;  // it filled the figure above too
      previous = query;
      if (!RunQuery(symbols, *query, device, &reading)) return reading;
    }
  }

  if (request.processes) {
    ProcessListOutcome outcome = ReadProcessLists(symbols, device, reading.memory.usedBytes,
                                                  reading.memory.totalBytes, &reading.processes, &reading.fieldErrors);
    if (outcome.deviceLost) {
      reading.hasError = true;
      reading.error = outcome.lostError;
      return reading;
    }
  }

  if (!request.memoryOnly && reading.migMode == 1) ReadMig(symbols, device, request, &reading);
  return reading;
}

}  // namespace gpugate
