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
  bool rowRemapping;         // Ampere and later datacenter boards remap rows...
  bool pageRetirement;       // ...older ones retire pages (each answers NOT_SUPPORTED for the other)
  unsigned pcieGeneration;   // the link's maximum; an idle board is reported at it too
  unsigned pcieWidth;
  bool fabric;               // NVSwitch-attached boards register with the fabric manager
};

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

const GpuModel kModels[] = {
    {"RTX PRO 6000 Blackwell Server Edition", 600, {180, 180, 405, 600}, {2617, 2617, 14001, 2347}, 8, 128 * kGiB, false, 0, "1794025", true, false, 5, 16, false},
    {"RTX PRO 6000 Blackwell", 600, {180, 180, 405, 600}, {2617, 2617, 14001, 2347}, 8, 128 * kGiB, true, 0, "1794024", true, false, 5, 16, false},
    {"A100-SXM4", 400, {210, 210, 1593, 795}, {1410, 1410, 1593, 1290}, 0, 128 * kGiB, false, 12, "1323621", true, false, 4, 16, false},
    {"A100", 300, {210, 210, 1512, 795}, {1410, 1410, 1512, 1290}, 0, 128 * kGiB, false, 0, "1323520", true, false, 4, 16, false},
    {"H100", 700, {345, 345, 2619, 765}, {1980, 1980, 2619, 1755}, 0, 128 * kGiB, false, 18, "1654223", true, false, 5, 16, true},
    {"H200", 700, {345, 345, 3201, 765}, {1980, 1980, 3201, 1755}, 0, 256 * kGiB, false, 18, "1655024", true, false, 5, 16, true},
    {"V100", 300, {135, 135, 877, 795}, {1530, 1530, 877, 1372}, 0, 32 * kGiB, false, 6, "0323618", false, true, 3, 16, false},
    {"", 250, {210, 210, 405, 555}, {1800, 1800, 7001, 1600}, 8, 256 * kMiB, true, 0, "0324117", false, false, 4, 16, false},
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
  if (!(given & kFieldRemappedRows)) d.remappedRows = {m.rowRemapping, {}};
  if (!(given & kFieldRetiredPagesPending)) d.retiredPagesPending = {m.pageRetirement, false};
  if (!(given & kFieldClockEventReasons)) d.clockEventReasons = {true, 1};  // gpu_idle
  if (!(given & kFieldPcieLink)) {
    d.pcieLink = {true, {m.pcieGeneration, m.pcieGeneration, m.pcieWidth, m.pcieWidth}};
  }
  if (!(given & kFieldFabric)) d.fabric = {m.fabric, {3, 0, 0}};  // completed, NVML_SUCCESS
}

}  // namespace gpugate_sim
