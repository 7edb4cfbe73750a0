// The simulator's in-memory model of a scenario: system versions, devices (with MIG
// instances and processes), the timeline of changes and the injected faults.
//
// Built by the scenario reader (scenario_reader.cc) from the JSON format documented in
// docs/scenarios.md; read by the runtime and the NVML entry points. Plain data, no locking:
// the runtime guards the live copy with its mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpugate_sim {

constexpr int kMaxDevices = 64;
constexpr int kMaxMigSlots = 16;
constexpr int64_t kNever = INT64_MAX;

/** A field NVML may answer NOT_SUPPORTED for (JSON null). */
template <typename T>
struct Supported {
  bool supported = true;
  T value{};
};

enum ProcessKindBits : unsigned { kKindCompute = 1, kKindGraphics = 2, kKindMps = 4 };

struct SimProcess {
  uint32_t pid = 0;
  bool usedKnown = true;  // false: NVML's "not available" (all ones)
  uint64_t usedBytes = 0;
  unsigned kinds = kKindCompute;
  std::string name;
  unsigned smUtilization = 0;      // percent, for nvmlDeviceGetProcessUtilization
  unsigned memoryUtilization = 0;
  bool hasInstanceIds = false;
  uint32_t gpuInstanceId = 0xFFFFFFFFu;
  uint32_t computeInstanceId = 0xFFFFFFFFu;
};

struct SimMemory {
  uint64_t totalBytes = 0;
  uint64_t reservedBytes = 0;
  uint64_t usedBytes = 0;  // excludes reserved (the v2 view)
  // A faulty driver's free figure, reported as is instead of the derived one (when set).
  bool freeReported = false;
  uint64_t reportedFreeBytes = 0;
};

struct SimMigDevice {
  int slot = 0;
  std::string uuid;
  std::string name;
  uint32_t gpuInstanceId = 0;
  uint32_t computeInstanceId = 0;
  SimMemory memory;
  std::vector<SimProcess> processes;
};

struct SimUtilization {
  unsigned gpu = 0;
  unsigned memory = 0;
};

/** Clock domains in nvmlClockType_t order (graphics, SM, memory, video), in MHz. */
struct SimClocks {
  unsigned graphics = 0, sm = 0, memory = 0, video = 0;
};

struct SimEccErrors {
  uint64_t corrected = 0, uncorrected = 0;
};

struct SimPcieThroughput {
  unsigned txKBps = 0, rxKBps = 0;
};

struct SimBar1 {
  uint64_t totalBytes = 0, usedBytes = 0;
};

/** nvmlDeviceGetRemappedRows: rows remapped so far, and whether a remap waits for a reset or failed. */
struct SimRemappedRows {
  unsigned correctable = 0, uncorrectable = 0;
  bool pending = false, failureOccurred = false;
};

/** PCIe link generation and width, as trained now and at most. */
struct SimPcieLink {
  unsigned generation = 0, maxGeneration = 0, width = 0, maxWidth = 0;
};

/** nvmlDeviceGetGpuFabricInfo: registration state (nvmlGpuFabricState_t), its result and the clique. */
struct SimFabric {
  unsigned state = 0;
  int status = 0;
  unsigned cliqueId = 0;
};

struct SimDevice {
  std::string name;
  std::string uuid;
  std::string pciBusId;  // canonical: 00000000:1B:00.0
  unsigned pciDomain = 0, pciBus = 0, pciDevice = 0, pciFunction = 0;
  uint32_t pciDeviceId = 0;
  uint32_t pciSubSystemId = 0;
  uint32_t minorNumber = 0;
  int ccMajor = 12, ccMinor = 0;
  SimMemory memory;
  Supported<bool> persistenceMode{true, true};
  Supported<int> computeMode{true, 0};
  Supported<bool> migMode{true, false};
  bool migModePendingSet = false;  // absent: pending = current
  bool migModePending = false;
  uint32_t maxMigDevices = 7;
  Supported<SimUtilization> utilization;
  Supported<unsigned> temperatureC{true, 30};
  Supported<double> powerWatts{true, 60.0};
  // Defaults for these come from the GPU model (gpu_models.cc) when the scenario omits them.
  Supported<unsigned> fanSpeedPercent;
  Supported<double> powerLimitWatts;
  Supported<SimClocks> clocksMHz;
  Supported<SimClocks> maxClocksMHz;
  Supported<unsigned> performanceState;
  Supported<SimEccErrors> eccErrors;
  Supported<unsigned> encoderUtilization;
  Supported<unsigned> decoderUtilization;
  Supported<bool> displayActive{true, false};
  Supported<bool> displayMode{true, false};
  Supported<SimPcieThroughput> pcieThroughputKBps;
  Supported<std::string> serial;
  Supported<SimBar1> bar1Memory;
  uint32_t nvlinkCount = 0;
  Supported<SimRemappedRows> remappedRows;
  Supported<bool> retiredPagesPending;
  Supported<uint64_t> clockEventReasons;  // nvmlClocksEventReasons bits
  Supported<SimPcieLink> pcieLink;
  Supported<SimFabric> fabric;
  // Field value 230 (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): nvmlDeviceGpuRecoveryAction_t, 0 none.
  Supported<unsigned> recoveryAction{true, 0};
  std::vector<SimProcess> processes;
  std::vector<SimMigDevice> migDevices;
  uint32_t claimedProcessCount = 0;  // a faulty driver's size answer for every process list (0: none)
};

/** Which device fields a timeline `set` changes (bit per field). */
enum DeviceFieldBits : uint64_t {
  kFieldName = 1ull << 0,
  kFieldUuid = 1ull << 1,
  kFieldPciBusId = 1ull << 2,
  kFieldPciDeviceId = 1ull << 3,
  kFieldPciSubSystemId = 1ull << 4,
  kFieldMinorNumber = 1ull << 5,
  kFieldComputeCapability = 1ull << 6,
  kFieldMemoryTotal = 1ull << 7,
  kFieldMemoryReserved = 1ull << 8,
  kFieldMemoryUsed = 1ull << 9,
  kFieldPersistenceMode = 1ull << 10,
  kFieldComputeMode = 1ull << 11,
  kFieldMigMode = 1ull << 12,
  kFieldMigModePending = 1ull << 13,
  kFieldMaxMigDevices = 1ull << 14,
  kFieldUtilization = 1ull << 15,
  kFieldTemperature = 1ull << 16,
  kFieldPower = 1ull << 17,
  kFieldProcesses = 1ull << 18,
  kFieldMigDevices = 1ull << 19,
  kFieldClaimedProcessCount = 1ull << 20,
  kFieldMemoryFree = 1ull << 21,
  kFieldFanSpeed = 1ull << 22,
  kFieldPowerLimit = 1ull << 23,
  kFieldClocks = 1ull << 24,
  kFieldMaxClocks = 1ull << 25,
  kFieldPerformanceState = 1ull << 26,
  kFieldEccErrors = 1ull << 27,
  kFieldEncoderUtilization = 1ull << 28,
  kFieldDecoderUtilization = 1ull << 29,
  kFieldDisplayActive = 1ull << 30,
  kFieldDisplayMode = 1ull << 31,
  kFieldPcieThroughput = 1ull << 32,
  kFieldSerial = 1ull << 33,
  kFieldBar1Memory = 1ull << 34,
  kFieldNvlinkCount = 1ull << 35,
  kFieldRemappedRows = 1ull << 36,
  kFieldRetiredPagesPending = 1ull << 37,
  kFieldClockEventReasons = 1ull << 38,
  kFieldPcieLink = 1ull << 39,
  kFieldFabric = 1ull << 40,
  kFieldRecoveryAction = 1ull << 41,
};

/** Copies the fields named by `mask` from `patch` into `target`. */
void applyDevicePatch(SimDevice& target, const SimDevice& patch, uint64_t mask);

struct SimFault {
  std::vector<bool> symbols;  // indexed by SymbolId: which functions it applies to
  int device = -1;            // -1: any (and calls without a device)
  bool hasReturn = false;
  int returnCode = 0;
  int64_t delayMs = 0;
  bool hang = false;
  std::string kernelBlock;    // non-empty: write a byte to this file first (blocks on a frozen filesystem)
  int crashSignal = 0;        // non-zero: the call kills the process with this signal
  int64_t fromCall = 0;       // active for the call whose 0-based index (of its function) is in [fromCall, untilCall)
  int64_t untilCall = kNever;
  int64_t atMs = 0;           // and while the time since the first init is in [atMs, untilMs)
  int64_t untilMs = kNever;
};

struct SimTimelineEntry {
  bool byCall = false;   // atCall (true) or atMs (false)
  int64_t at = 0;
  int function = -1;     // atCall only: symbol id, or -1 = every NVML function
  int device = -1;       // -1: all devices; -2: no device change
  SimDevice patch;
  uint64_t mask = 0;
  bool setsFaults = false;
  std::vector<SimFault> faults;
};

struct SimSystem {
  std::string driverVersion = "580.95.05";
  std::string nvmlVersion = "13.580.95.05";
  int cudaDriverVersion = 13000;
  // NVIDIA's R525 reference semantics: nvmlDeviceGetMemoryInfo_v2 counts reserved in `used` too.
  bool memoryV2UsedIncludesReserved = false;
  int profile = -1;  // ProfileId: "driverProfile", else the profile of driverVersion
  int profileLine = 1, profileColumn = 1;  // where the profile was decided, for messages
};

/** Where the timeline's 0 ms is (see docs/scenarios.md, "The shared clock"). */
struct SimClockAnchor {
  enum class Kind { FileWritten, WallClock, PerReader } kind = Kind::FileWritten;
  int64_t unixNs = 0;  // WallClock: the instant, in CLOCK_REALTIME nanoseconds
};

struct Scenario {
  SimSystem system;
  SimClockAnchor startedAt;
  std::vector<SimDevice> devices;
  std::vector<SimTimelineEntry> timeline;
  std::vector<SimFault> faults;
};

/**
 * Reads and validates the scenario file at `path`. On failure returns false and sets
 * `error` to one line "PATH:LINE:COL: expected ..." (or "PATH: ..." when the file is unreadable).
 */
bool readScenarioFile(const std::string& path, Scenario& out, std::string& error);

/** Same, from text already in memory (`path` is only used in messages). */
bool readScenarioText(const std::string& path, const std::string& text, Scenario& out, std::string& error);

/**
 * Parses a "startedAt" value given as text (GPUGATE_SIM_STARTED_AT): Unix milliseconds, an ISO
 * 8601 UTC time ("2026-12-01T09:00:00Z", optional fraction), or "init". False when it is none.
 */
bool parseClockAnchor(const std::string& text, SimClockAnchor& out);

}  // namespace gpugate_sim
