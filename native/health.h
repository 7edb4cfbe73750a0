// Health readings of one GPU, read on request (gpugate doctor), never by a snapshot: MIG mode
// current and pending, remapped rows, volatile uncorrected ECC errors, retired pages pending,
// the current clock event (throttle) reasons, the PCIe link as trained and at most, and fabric
// registration. Each field is one NVML query reported as NVML answered it: its values, or its
// return code (FUNCTION_NOT_FOUND when the library lacks the symbol). No judgement here: what a
// reading means is decided in TypeScript (src/doctor/).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "readings.h"
#include "symbols.h"

namespace gpugate {

// One query's outcome: `code` NVML_SUCCESS with `values` named, or the failure.
struct HealthField {
  std::string name;
  nvmlReturn_t code = NVML_SUCCESS;
  std::string symbol;   // the exported function called (or the newest candidate when none bound)
  std::string message;  // on failure: the library's text for `code`
  std::vector<std::pair<std::string, double>> values;
};

struct HealthReading {
  unsigned index = 0;
  std::vector<HealthField> fields;
};

// Reads every health field of one device. The caller holds the session's NVML mutex. A device
// whose handle failed at open reports that failure in every field.
HealthReading ReadHealth(const SymbolTable& symbols, const DeviceIdentity& identity);

}  // namespace gpugate
