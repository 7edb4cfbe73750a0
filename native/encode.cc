// Flattening snapshot readings into numbers plus a string table (slots named in wire_layout.h).
#include "encode.h"

namespace gpugate {

namespace {

// Appends one record of `slots` NaN slots and returns it; valid until the next append.
double* AppendRecord(std::vector<double>* numbers, int slots) {
  const size_t base = numbers->size();
  numbers->resize(base + slots, kNull);
  return numbers->data() + base;
}

void PutProcesses(const ProcessListReading& list, std::vector<double>* numbers) {
  if (!list.read) return;
  for (const ProcessReading& process : list.processes) {
    double* slot = AppendRecord(numbers, kProcessSlots);
    slot[kProcessPid] = process.pid;
    slot[kProcessUsedBytes] = process.usedBytes;
    slot[kProcessKinds] = process.kinds;
    slot[kProcessGpuInstanceId] = process.gpuInstanceId;
    slot[kProcessComputeInstanceId] = process.computeInstanceId;
  }
}

double MemorySource(const MemoryReading& memory) { return memory.source == 0 ? kNull : memory.source; }

}  // namespace

double StringTable::Intern(const std::string& text) {
  auto found = index_.find(text);
  if (found != index_.end()) return found->second;
  const double position = static_cast<double>(strings_->size());
  strings_->push_back(text);
  index_.emplace(text, position);
  return position;
}

void EncodeSnapshot(const std::vector<DeviceReading>& devices, EncodedSnapshot* out) {
  std::vector<double>& numbers = out->numbers;
  StringTable strings(&out->strings);
  numbers.clear();
  numbers.reserve(kHeaderSlots + devices.size() * (kDeviceSlots + 8 * kProcessSlots));
  AppendRecord(&numbers, kHeaderSlots)[kHeaderDeviceCount] = static_cast<double>(devices.size());
  for (const DeviceReading& device : devices) {
    double* slot = AppendRecord(&numbers, kDeviceSlots);
    slot[kDevIndex] = device.index;
    slot[kDevMemTotal] = device.memory.totalBytes;
    slot[kDevMemFree] = device.memory.freeBytes;
    slot[kDevMemUsed] = device.memory.usedBytes;
    slot[kDevMemReserved] = device.memory.reservedBytes;
    slot[kDevMemSource] = MemorySource(device.memory);
#define GPUGATE_PUT_FIGURE(member, figureSlot, wireName, query) slot[figureSlot] = device.member;
    GPUGATE_DEVICE_FIGURES(GPUGATE_PUT_FIGURE)
#undef GPUGATE_PUT_FIGURE
    if (device.hasError) {
      slot[kDevErrorCode] = device.error.code;
      slot[kDevErrorSymbol] = strings.Intern(device.error.symbol);
      slot[kDevErrorMessage] = strings.Intern(device.error.message);
    }
    slot[kDevFieldErrorCount] = static_cast<double>(device.fieldErrors.size());
    if (device.processes.read) {
      slot[kDevProcessCount] = static_cast<double>(device.processes.processes.size());
      slot[kDevProcessSymbol] = strings.Intern(device.processes.symbol);
      slot[kDevProcessStride] = device.processes.strideBytes;
    }
    if (device.migListed) slot[kDevMigCount] = static_cast<double>(device.migDevices.size());
    // `slot` may dangle after the appends below; it is not used again.
    for (const CallError& error : device.fieldErrors) {
      double* e = AppendRecord(&numbers, kErrorSlots);
      e[kErrorField] = strings.Intern(error.field);
      e[kErrorCode] = error.code;
      e[kErrorSymbol] = strings.Intern(error.symbol);
      e[kErrorMessage] = strings.Intern(error.message);
    }
    PutProcesses(device.processes, &numbers);
    if (!device.migListed) continue;
    for (const MigReading& mig : device.migDevices) {
      double* m = AppendRecord(&numbers, kMigSlots);
      m[kMigSlotIndex] = mig.slot;
      m[kMigUuid] = strings.Intern(mig.uuid);
      m[kMigGpuInstanceId] = mig.gpuInstanceId;
      m[kMigComputeInstanceId] = mig.computeInstanceId;
      m[kMigMemTotal] = mig.memory.totalBytes;
      m[kMigMemFree] = mig.memory.freeBytes;
      m[kMigMemUsed] = mig.memory.usedBytes;
      m[kMigMemReserved] = mig.memory.reservedBytes;
      m[kMigMemSource] = MemorySource(mig.memory);
      if (mig.hasError) {
        m[kMigErrorCode] = mig.error.code;
        m[kMigErrorSymbol] = strings.Intern(mig.error.symbol);
        m[kMigErrorMessage] = strings.Intern(mig.error.message);
        m[kMigErrorField] = strings.Intern(mig.error.field);
      }
      if (mig.processes.read) {
        m[kMigProcessCount] = static_cast<double>(mig.processes.processes.size());
        m[kMigProcessStride] = mig.processes.strideBytes;
      }
      PutProcesses(mig.processes, &numbers);
    }
  }
}

}  // namespace gpugate
