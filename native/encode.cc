// Flattening snapshot readings into numbers plus a string table (layout in encode.h).
#include "encode.h"

namespace gpugate {

namespace {

void PutMemory(const MemoryReading& memory, double* slots) {
  slots[0] = memory.totalBytes;
  slots[1] = memory.freeBytes;
  slots[2] = memory.usedBytes;
  slots[3] = memory.reservedBytes;
  slots[4] = memory.source == 0 ? kNull : memory.source;
}

void PutProcesses(const ProcessListReading& list, std::vector<double>* numbers) {
  if (!list.read) return;
  for (const ProcessReading& process : list.processes) {
    numbers->push_back(process.pid);
    numbers->push_back(process.usedBytes);
    numbers->push_back(process.kinds);
    numbers->push_back(process.gpuInstanceId);
    numbers->push_back(process.computeInstanceId);
  }
}

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
  numbers.push_back(kEncodingVersion);
  numbers.push_back(static_cast<double>(devices.size()));
  for (const DeviceReading& device : devices) {
    const size_t base = numbers.size();
    numbers.resize(base + kDeviceSlots, kNull);
    double* slot = numbers.data() + base;
    slot[kDevIndex] = device.index;
    PutMemory(device.memory, slot + kDevMemTotal);
    slot[kDevPersistence] = device.persistenceMode;
    slot[kDevComputeMode] = device.computeMode;
    slot[kDevMigMode] = device.migMode;
    slot[kDevUtilGpu] = device.utilizationGpuPercent;
    slot[kDevUtilMemory] = device.utilizationMemoryPercent;
    slot[kDevTemperatureC] = device.temperatureC;
    slot[kDevPowerMilliwatts] = device.powerMilliwatts;
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
    // `slot` may dangle after the pushes below; it is not used again.
    for (const CallError& error : device.fieldErrors) {
      numbers.push_back(strings.Intern(error.field));
      numbers.push_back(error.code);
      numbers.push_back(strings.Intern(error.symbol));
      numbers.push_back(strings.Intern(error.message));
    }
    PutProcesses(device.processes, &numbers);
    if (!device.migListed) continue;
    for (const MigReading& mig : device.migDevices) {
      const size_t migBase = numbers.size();
      numbers.resize(migBase + kMigSlots, kNull);
      double* m = numbers.data() + migBase;
      m[kMigSlotIndex] = mig.slot;
      m[kMigUuid] = strings.Intern(mig.uuid);
      m[kMigGpuInstanceId] = mig.gpuInstanceId;
      m[kMigComputeInstanceId] = mig.computeInstanceId;
      PutMemory(mig.memory, m + kMigMemTotal);
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
