// Plain C++ records of what one open or one snapshot read from NVML.
//
// These are the hand-off between the reading code (identity.cc, queries.cc, process_list.cc),
// which fills them on the NVML thread, and the encoder (encode.cc), which flattens them for
// JavaScript. A number NVML could not give is NaN (it becomes null in TypeScript); a failed
// call is kept as a CallError naming the field and the exported symbol that failed.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "nvml_abi.h"

namespace gpugate {

constexpr double kNull = NAN;

struct CallError {
  std::string field;    // e.g. "memory", "processes", "uuid"
  nvmlReturn_t code;    // the raw nvmlReturn_t (NVML_SUCCESS for a gpugate-side check, see detail)
  std::string symbol;   // the exported function that failed
  std::string message;  // the library's nvmlErrorString text, or gpugate's own explanation
};

struct DeviceIdentity {
  unsigned index = 0;
  nvmlDevice_t handle = nullptr;
  bool hasError = false;  // the handle could not be obtained: every snapshot reports this error
  CallError error;
  std::string name;
  std::string uuid;
  std::string pciBusId;
  double minorNumber = kNull;
  int computeCapabilityMajor = -1;
  int computeCapabilityMinor = -1;
  double recoveryAction = kNull;  // NVML's recovery action code (field 230); NaN when unread
  std::vector<CallError> fieldErrors;
};

struct MemoryReading {
  int source = 0;  // 2 = nvmlMemory_v2, 1 = v1 (reserved unknown), 0 = not read
  double totalBytes = kNull;
  double freeBytes = kNull;
  double usedBytes = kNull;
  double reservedBytes = kNull;
};

enum ProcessKindBit : unsigned { kKindCompute = 1, kKindGraphics = 2, kKindMps = 4 };

struct ProcessReading {
  double pid = 0;
  double usedBytes = kNull;
  unsigned kinds = 0;
  double gpuInstanceId = kNull;
  double computeInstanceId = kNull;
};

struct ProcessListReading {
  bool read = false;          // false: not asked for, or failed (see the field errors)
  std::string symbol;         // the compute list's bound symbol
  double strideBytes = kNull;  // the entry size inferred from the first non-empty list
  std::vector<ProcessReading> processes;
};

struct MigReading {
  unsigned slot = 0;
  std::string uuid;
  double gpuInstanceId = kNull;
  double computeInstanceId = kNull;
  MemoryReading memory;
  ProcessListReading processes;
  bool hasError = false;
  CallError error;
};

// The per-device scalar figures of a snapshot, each written once: X(member of DeviceReading,
// its DeviceSlot enumerator, its wire name, the query in queries.cc that reads it). The reading
// members, the wire slots and names (wire_layout.h), the encoder and the snapshot's reads are all
// generated from these rows, so a new figure is one row plus its query. A macro, because a
// struct's members and an enum's enumerators can be generated from a table no other way in C++17.
// Rows run in read order; one query that fills several figures (utilization) sits on each of
// them, consecutively, and runs once. The wire names are what TypeScript reads: never rename one.
#define GPUGATE_DEVICE_FIGURES(X)                                                   \
  X(persistenceMode, kDevPersistence, "persistence", kPersistenceModeQuery)         \
  X(computeMode, kDevComputeMode, "computeMode", kComputeModeQuery)                 \
  X(migMode, kDevMigMode, "migMode", kMigModeQuery)                                 \
  X(utilizationGpuPercent, kDevUtilGpu, "utilGpu", kUtilizationQuery)               \
  X(utilizationMemoryPercent, kDevUtilMemory, "utilMemory", kUtilizationQuery)      \
  X(temperatureC, kDevTemperatureC, "temperatureC", kTemperatureQuery)              \
  X(powerMilliwatts, kDevPowerMilliwatts, "powerMilliwatts", kPowerQuery)

struct DeviceReading {
  unsigned index = 0;
  bool hasError = false;  // device-level failure (e.g. GPU lost): other fields stay null
  CallError error;
  MemoryReading memory;
#define GPUGATE_FIGURE_MEMBER(member, slot, wireName, query) double member = kNull;
  GPUGATE_DEVICE_FIGURES(GPUGATE_FIGURE_MEMBER)
#undef GPUGATE_FIGURE_MEMBER
  ProcessListReading processes;
  bool migListed = false;
  std::vector<MigReading> migDevices;
  std::vector<CallError> fieldErrors;
};

struct SnapshotRequest {
  bool processes = false;
  bool memoryOnly = false;
  bool computeMode = false;  // with memoryOnly: read the compute mode too (a gate decides on it)
  std::vector<unsigned> devices;  // positions into the session's device list; empty = all
  bool allDevices = true;
};

}  // namespace gpugate
