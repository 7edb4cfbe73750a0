// Reading NVML's running-process lists safely (see process_list.h for the protocol).
#include "process_list.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "errors.h"

namespace gpugate {

namespace {

constexpr unsigned char kSentinel = 0xA5;
constexpr size_t kWidestEntryBytes = 32;
constexpr int kFillAttempts = 4;
constexpr unsigned kMaxPlausibleInstanceId = 255;
constexpr size_t kStrides[] = {16, 24, 32};
constexpr unsigned kPidMaxLimit = 4194304;  // PID_MAX_LIMIT on 64-bit Linux: no pid is larger

struct RawEntry {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
  bool hasInstanceIds;
};

struct RawList {
  nvmlReturn_t code = NVML_SUCCESS;
  unsigned claimedEntries = 0;  // set with code INSUFFICIENT_SIZE: a size answer above kMaxProcessEntries
  size_t strideBytes = 0;  // 0 when the list was empty (nothing to measure)
  bool implausible = false;
  std::vector<RawEntry> entries;
};

unsigned ReadU32(const unsigned char* p) {
  unsigned value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

unsigned long long ReadU64(const unsigned char* p) {
  unsigned long long value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

std::vector<RawEntry> Decode(const std::vector<unsigned char>& buffer, unsigned count, size_t stride) {
  std::vector<RawEntry> entries;
  entries.reserve(count);
  for (unsigned i = 0; i < count; ++i) {
    const unsigned char* p = buffer.data() + static_cast<size_t>(i) * stride;
    RawEntry entry{ReadU32(p), ReadU64(p + 8), GPUGATE_NVML_INSTANCE_ID_NONE, GPUGATE_NVML_INSTANCE_ID_NONE, false};
    if (stride >= 24) {
      entry.gpuInstanceId = ReadU32(p + 16);
      entry.computeInstanceId = ReadU32(p + 20);
      entry.hasInstanceIds = true;
    }
    entries.push_back(entry);
  }
  return entries;
}

bool InstanceIdPlausible(unsigned id) { return id == GPUGATE_NVML_INSTANCE_ID_NONE || id <= kMaxPlausibleInstanceId; }

// Every entry must look like a process (pid within `pidBound`, instance ids "none" or small)
// and the memory sum must fit under `memoryBound` (if known).
bool Plausible(const std::vector<RawEntry>& entries, unsigned pidBound, double memoryBound) {
  double sum = 0;
  for (const RawEntry& entry : entries) {
    if (entry.pid == 0 || entry.pid > pidBound) return false;
    if (entry.hasInstanceIds &&
        (!InstanceIdPlausible(entry.gpuInstanceId) || !InstanceIdPlausible(entry.computeInstanceId))) {
      return false;
    }
    if (entry.usedGpuMemory != GPUGATE_NVML_VALUE_NOT_AVAILABLE_U64) sum += static_cast<double>(entry.usedGpuMemory);
  }
  return std::isnan(memoryBound) || sum <= memoryBound;
}

// The stride whose n entries best explain how far the library wrote into the buffer.
size_t MeasuredStride(const std::vector<unsigned char>& buffer, unsigned count, size_t declared) {
  size_t extent = buffer.size();
  while (extent > 0 && buffer[extent - 1] == kSentinel) --extent;
  size_t best = declared;
  size_t bestDistance = static_cast<size_t>(-1);
  for (size_t stride : kStrides) {
    const size_t full = stride * count;
    const size_t distance = full > extent ? full - extent : extent - full;
    if (distance < bestDistance || (distance == bestDistance && stride == declared)) {
      best = stride;
      bestDistance = distance;
    }
  }
  return best;
}

RawList ReadOneList(const SymbolTable& symbols, Fn fn, nvmlDevice_t device, double usedBytes, double totalBytes) {
  RawList list;
  auto call = symbols.Get<nvmlDeviceGetProcesses_fn>(fn);
  const size_t declared = symbols.Abi(fn) >= 2 ? 24 : 16;

  unsigned needed = 0;
  nvmlReturn_t code = call(device, &needed, nullptr);
  if (code == NVML_SUCCESS) return list;  // no processes
  if (code != NVML_ERROR_INSUFFICIENT_SIZE) {
    list.code = code;
    return list;
  }
  std::vector<unsigned char> buffer;
  unsigned count = 0;
  for (int attempt = 0; attempt < kFillAttempts; ++attempt) {
    if (needed > kMaxProcessEntries) {
      list.code = NVML_ERROR_INSUFFICIENT_SIZE;
      list.claimedEntries = needed;
      return list;
    }
    // Headroom (the list is live), within the bound; computed wide so it cannot wrap.
    const size_t wanted = static_cast<size_t>(needed) + needed / 2 + 4;
    const unsigned capacity = static_cast<unsigned>(wanted < kMaxProcessEntries ? wanted : kMaxProcessEntries);
    buffer.assign(static_cast<size_t>(capacity) * kWidestEntryBytes, kSentinel);
    count = capacity;
    code = call(device, &count, buffer.data());
    if (code != NVML_ERROR_INSUFFICIENT_SIZE) break;
    needed = count > needed ? count : needed + 1;
  }
  if (code == NVML_ERROR_INSUFFICIENT_SIZE && needed > kMaxProcessEntries) {
    list.code = code;
    list.claimedEntries = needed;
    return list;
  }
  if (code != NVML_SUCCESS) {
    list.code = code;
    return list;
  }
  if (count == 0) return list;
  if (count > buffer.size() / kWidestEntryBytes) {  // a library claiming more than it was given room for
    list.code = NVML_ERROR_INSUFFICIENT_SIZE;
    return list;
  }

  const size_t measured = MeasuredStride(buffer, count, declared);
  std::vector<size_t> order{measured, declared};
  for (size_t stride : kStrides) order.push_back(stride);
  // Strict check first (pids within this kernel's pid_max, memory within the device's used
  // memory); then a relaxed one (pids within the kernel's absolute limit, which a host with a
  // larger pid_max than ours, e.g. outside this container, may use; memory within the total,
  // for drivers that account memory loosely). Otherwise the list cannot be trusted.
  const struct {
    unsigned pidBound;
    double memoryBound;
  } checks[] = {{PidMax(), usedBytes}, {kPidMaxLimit, totalBytes}};
  for (const auto& check : checks) {
    for (size_t stride : order) {
      std::vector<RawEntry> entries = Decode(buffer, count, stride);
      if (Plausible(entries, check.pidBound, check.memoryBound)) {
        list.strideBytes = stride;
        list.entries = std::move(entries);
        return list;
      }
    }
  }
  list.implausible = true;
  list.strideBytes = measured;
  return list;
}

void Merge(const RawList& list, unsigned kindBit, std::vector<ProcessReading>* merged) {
  for (const RawEntry& entry : list.entries) {
    ProcessReading* target = nullptr;
    for (ProcessReading& existing : *merged) {
      if (existing.pid == entry.pid) target = &existing;
    }
    if (target == nullptr) {
      merged->push_back(ProcessReading{});
      target = &merged->back();
      target->pid = entry.pid;
    }
    target->kinds |= kindBit;
    if (entry.usedGpuMemory != GPUGATE_NVML_VALUE_NOT_AVAILABLE_U64) {
      const double used = static_cast<double>(entry.usedGpuMemory);
      if (std::isnan(target->usedBytes) || used > target->usedBytes) target->usedBytes = used;
    }
    if (entry.hasInstanceIds && entry.gpuInstanceId != GPUGATE_NVML_INSTANCE_ID_NONE) {
      target->gpuInstanceId = entry.gpuInstanceId;
    }
    if (entry.hasInstanceIds && entry.computeInstanceId != GPUGATE_NVML_INSTANCE_ID_NONE) {
      target->computeInstanceId = entry.computeInstanceId;
    }
  }
}

}  // namespace

unsigned PidMax() {
  static const unsigned pidMax = [] {
    unsigned value = kPidMaxLimit;
    if (FILE* file = std::fopen("/proc/sys/kernel/pid_max", "r")) {
      unsigned read = 0;
      if (std::fscanf(file, "%u", &read) == 1 && read > 0) value = read;
      std::fclose(file);
    }
    return value;
  }();
  return pidMax;
}

ProcessListOutcome ReadProcessLists(const SymbolTable& symbols, nvmlDevice_t device, double usedBytes,
                                    double totalBytes, ProcessListReading* out, std::vector<CallError>* errors) {
  struct Kind {
    Fn fn;
    unsigned bit;
    const char* field;
  };
  const Kind kinds[] = {
      {kDeviceGetComputeRunningProcesses, kKindCompute, "processes"},
      {kDeviceGetGraphicsRunningProcesses, kKindGraphics, "processes.graphics"},
      {kDeviceGetMpsComputeRunningProcesses, kKindMps, "processes.mps"},
  };
  ProcessListOutcome outcome;
  out->read = false;
  out->processes.clear();
  const char* computeSymbol = symbols.Symbol(kDeviceGetComputeRunningProcesses);
  out->symbol = computeSymbol != nullptr ? computeSymbol : "";
  if (!symbols.Has(kDeviceGetComputeRunningProcesses)) {
    errors->push_back(
        MakeCallError(symbols, "processes", kDeviceGetComputeRunningProcesses, NVML_ERROR_FUNCTION_NOT_FOUND));
    return outcome;
  }
  std::vector<ProcessReading> merged;
  for (const Kind& kind : kinds) {
    if (!symbols.Has(kind.fn)) {
      errors->push_back(MakeCallError(symbols, kind.field, kind.fn, NVML_ERROR_FUNCTION_NOT_FOUND));
      continue;
    }
    RawList list = ReadOneList(symbols, kind.fn, device, usedBytes, totalBytes);
    if (IsDeviceLevelFailure(list.code)) {
      outcome.deviceLost = true;
      outcome.lostError = MakeCallError(symbols, "processes", kind.fn, list.code);
      return outcome;
    }
    if (list.implausible) {
      CallError error = MakeCallError(symbols, kind.field, kind.fn, NVML_SUCCESS);
      error.message = std::string(symbols.Symbol(kind.fn)) +
                      " returned entries that are not plausible at any known stride (16, 24, 32 bytes): "
                      "pids above pid_max, impossible instance ids or more memory than the device has";
      errors->push_back(error);
      if (kind.bit == kKindCompute) return outcome;
      continue;
    }
    if (list.code != NVML_SUCCESS) {
      // The compute list is the one that matters; the others may be unsupported on compute GPUs.
      CallError error = MakeCallError(symbols, kind.field, kind.fn, list.code);
      if (list.claimedEntries != 0) {
        error.message = std::string(symbols.Symbol(kind.fn)) + " asked for room for " +
                        std::to_string(list.claimedEntries) + " entries, more than the " +
                        std::to_string(kMaxProcessEntries) +
                        " gpugate reads from one list: a driver fault; the list was not read";
      }
      errors->push_back(error);
      if (kind.bit == kKindCompute) return outcome;
      continue;
    }
    if (list.strideBytes != 0 && std::isnan(out->strideBytes)) out->strideBytes = static_cast<double>(list.strideBytes);
    Merge(list, kind.bit, &merged);
  }
  out->processes = std::move(merged);
  out->read = true;
  return outcome;
}

}  // namespace gpugate
