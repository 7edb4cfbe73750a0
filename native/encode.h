// Flattening snapshot readings into one Float64Array-ready vector plus a string table.
//
// Building JavaScript objects through Node-API costs far more than building them in
// JavaScript, so a snapshot crosses as numbers (NaN = null) and indices into a string table;
// src/nvml/snapshot-decode.ts rebuilds the objects. The layout below is versioned and mirrored in
// src/nvml/native-binding.ts; the contract test compares the two through encodingLayout().
//
// Layout (every slot a double):
//   header:   [version, deviceCount]
//   device:   kDeviceSlots fixed slots (DeviceSlot), then fieldErrorCount x kErrorSlots,
//             then processCount x kProcessSlots, then migCount x (kMigSlots + its processes)
//   error:    [fieldString, nvmlReturn, symbolString, messageString]
//   process:  [pid, usedBytes, kindsBitmask, gpuInstanceId, computeInstanceId]
//   mig:      kMigSlots fixed slots (MigSlot), then processCount x kProcessSlots
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "readings.h"

namespace gpugate {

constexpr int kEncodingVersion = 1;
constexpr int kHeaderSlots = 2;

enum DeviceSlot : int {
  kDevIndex,
  kDevMemTotal,
  kDevMemFree,
  kDevMemUsed,
  kDevMemReserved,
  kDevMemSource,  // 2, 1, or NaN when memory could not be read
  kDevPersistence,
  kDevComputeMode,
  kDevMigMode,
  kDevUtilGpu,
  kDevUtilMemory,
  kDevTemperatureC,
  kDevPowerMilliwatts,
  kDevErrorCode,  // NaN when the device has no device-level error
  kDevErrorSymbol,
  kDevErrorMessage,
  kDevFieldErrorCount,
  kDevProcessCount,  // NaN when the lists were not read (not asked for, or failed)
  kDevProcessSymbol,
  kDevProcessStride,
  kDevMigCount,  // NaN when the MIG devices were not listed
  kDeviceSlots,
};

enum MigSlot : int {
  kMigSlotIndex,
  kMigUuid,
  kMigGpuInstanceId,
  kMigComputeInstanceId,
  kMigMemTotal,
  kMigMemFree,
  kMigMemUsed,
  kMigMemReserved,
  kMigMemSource,
  kMigErrorCode,
  kMigErrorSymbol,
  kMigErrorMessage,
  kMigErrorField,
  kMigProcessCount,
  kMigProcessStride,
  kMigSlots,
};

constexpr int kErrorSlots = 4;
constexpr int kProcessSlots = 5;

struct EncodedSnapshot {
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

class StringTable {
 public:
  explicit StringTable(std::vector<std::string>* strings) : strings_(strings) {}
  double Intern(const std::string& text);

 private:
  std::vector<std::string>* strings_;
  std::unordered_map<std::string, double> index_;
};

void EncodeSnapshot(const std::vector<DeviceReading>& devices, EncodedSnapshot* out);

}  // namespace gpugate
