// Flattening snapshot readings into one Float64Array-ready vector plus a string table.
//
// Building JavaScript objects through Node-API costs far more than building them in
// JavaScript, so a snapshot crosses as numbers (NaN = null) and indices into a string table;
// src/nvml/snapshot-decode.ts rebuilds the objects. The slots are named in wire_layout.h.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "readings.h"
#include "wire_layout.h"

namespace gpugate {

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
