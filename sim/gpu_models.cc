// Per-model defaults for simulated GPUs (see gpu_models.h). Values are what the real boards
// report through NVML; a name no row matches gets a generic PCIe card with a fan.
#include "gpu_models.h"

#include <cstdio>
#include <cstring>

namespace gpugate_sim {

namespace {

struct GpuModel {
  const char* nameContains;  // matched against the NVML name; first match wins
  double powerLimitWatts;
  SimClocks idleClocks;      // what an idle board with persistence mode reports
  SimClocks maxClocks;
  unsigned performanceState;
  uint64_t bar1TotalBytes;
  bool hasFan;               // passively cooled boards answer NOT_SUPPORTED for the fan
  uint32_t nvlinkCount;
  const char* serialPrefix;
};

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

const GpuModel kModels[] = {
    {"RTX PRO 6000 Blackwell Server Edition", 600, {180, 180, 405, 600}, {2617, 2617, 14001, 2347}, 8, 128 * kGiB, false, 0, "1794025"},
    {"RTX PRO 6000 Blackwell", 600, {180, 180, 405, 600}, {2617, 2617, 14001, 2347}, 8, 128 * kGiB, true, 0, "1794024"},
    {"A100-SXM4", 400, {210, 210, 1593, 795}, {1410, 1410, 1593, 1290}, 0, 128 * kGiB, false, 12, "1323621"},
    {"A100", 300, {210, 210, 1512, 795}, {1410, 1410, 1512, 1290}, 0, 128 * kGiB, false, 0, "1323520"},
    {"H100", 700, {345, 345, 2619, 765}, {1980, 1980, 2619, 1755}, 0, 128 * kGiB, false, 18, "1654223"},
    {"H200", 700, {345, 345, 3201, 765}, {1980, 1980, 3201, 1755}, 0, 256 * kGiB, false, 18, "1655024"},
    {"", 250, {210, 210, 405, 555}, {1800, 1800, 7001, 1600}, 8, 256 * kMiB, true, 0, "0324117"},
};

const GpuModel& modelFor(const std::string& name) {
  for (const GpuModel& m : kModels) {
    if (name.find(m.nameContains) != std::string::npos) return m;
  }
  return kModels[sizeof kModels / sizeof kModels[0] - 1];
}

}  // namespace

void applyModelDefaults(SimDevice& d, uint64_t given, size_t index) {
  const GpuModel& m = modelFor(d.name);
  if (!(given & kFieldFanSpeed)) d.fanSpeedPercent = {m.hasFan, m.hasFan ? 30u : 0u};
  if (!(given & kFieldPowerLimit)) d.powerLimitWatts = {true, m.powerLimitWatts};
  if (!(given & kFieldClocks)) d.clocksMHz = {true, m.idleClocks};
  if (!(given & kFieldMaxClocks)) d.maxClocksMHz = {true, m.maxClocks};
  if (!(given & kFieldPerformanceState)) d.performanceState = {true, m.performanceState};
  if (!(given & kFieldEccErrors)) d.eccErrors = {true, {}};
  if (!(given & kFieldEncoderUtilization)) d.encoderUtilization = {true, 0};
  if (!(given & kFieldDecoderUtilization)) d.decoderUtilization = {true, 0};
  if (!(given & kFieldPcieThroughput)) d.pcieThroughputKBps = {true, {}};
  if (!(given & kFieldSerial)) {
    char serial[32];
    snprintf(serial, sizeof serial, "%s%06zu", m.serialPrefix, 100 + index);
    d.serial = {true, serial};
  }
  if (!(given & kFieldBar1Memory)) d.bar1Memory = {true, {m.bar1TotalBytes, 2 * kMiB}};
  if (!(given & kFieldNvlinkCount)) d.nvlinkCount = m.nvlinkCount;
}

}  // namespace gpugate_sim
