// One NVML session: load, bind, init once, identities, snapshots, shutdown once (see session.h).
#include "session.h"

#include <cstring>

#include "errors.h"
#include "queries.h"

namespace gpugate {

namespace {

std::string ReadSystemString(const SymbolTable& symbols, Fn fn, size_t size) {
  if (!symbols.Has(fn)) return "";
  std::vector<char> buffer(size, '\0');
  if (symbols.Get<nvmlSystemGetString_fn>(fn)(buffer.data(), static_cast<unsigned>(size)) != NVML_SUCCESS) return "";
  return std::string(buffer.data(), strnlen(buffer.data(), size));
}

std::string SimulatorError(const SymbolTable& symbols) {
  if (!symbols.Has(kSimLastError)) return "";
  using LastError = const char* (*)();
  const char* text = symbols.Get<LastError>(kSimLastError)();
  return text != nullptr ? text : "";
}

}  // namespace

OpenFailure SessionCore::Open(const std::string& explicitPath) {
  std::lock_guard<std::timed_mutex> lock(nvmlMutex);
  symbols_.Reading(-1);
  OpenFailure failure;
  if (!LoadNvmlLibrary(explicitPath, &library_)) {
    failure.kind = OpenFailure::kLibraryNotFound;
    failure.code = NVML_ERROR_LIBRARY_NOT_FOUND;
    failure.attempts = library_.attempts;
    failure.message = "could not load the NVML library";
    return failure;
  }
  // The library stays loaded for the life of the process: NVML does not support being
  // unloaded, and a thread abandoned inside a hung call may still be executing its code.
  const Fn missing = BindSymbols(library_.handle, &symbols_);
  if (missing != kFnCount) {
    failure.kind = OpenFailure::kFunctionNotFound;
    failure.code = NVML_ERROR_FUNCTION_NOT_FOUND;
    failure.symbol = PreferredSymbol(missing);
    failure.message = library_.path + " does not export " + failure.symbol + " or any older variant";
    return failure;
  }
  // An NVML call that failed during open: its code, symbol, the driver's text, the simulator's reason.
  auto nvmlFailure = [&](Fn fn, nvmlReturn_t code) {
    failure.kind = OpenFailure::kNvml;
    failure.code = code;
    failure.symbol = symbols_.Symbol(fn);
    failure.message = NvmlErrorText(symbols_.Get<nvmlErrorString_fn>(kErrorString), code);
    failure.simulatorError = SimulatorError(symbols_);
    return failure;
  };
  nvmlReturn_t code = symbols_.Get<nvmlInit_fn>(kInit)();
  if (code != NVML_SUCCESS) return nvmlFailure(kInit, code);
  initialized_ = true;

  versions_.driverVersion =
      ReadSystemString(symbols_, kSystemGetDriverVersion, GPUGATE_NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
  versions_.nvmlVersion =
      ReadSystemString(symbols_, kSystemGetNvmlVersion, GPUGATE_NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
  if (symbols_.Has(kSystemGetCudaDriverVersion)) {
    int version = 0;
    if (symbols_.Get<nvmlSystemGetCudaDriverVersion_fn>(kSystemGetCudaDriverVersion)(&version) == NVML_SUCCESS) {
      versions_.cudaDriverVersion = version;
    }
  }

  unsigned count = 0;
  code = symbols_.Get<nvmlDeviceGetCount_fn>(kDeviceGetCount)(&count);
  if (code != NVML_SUCCESS) {
    OpenFailure countFailure = nvmlFailure(kDeviceGetCount, code);  // read the texts before shutdown
    symbols_.Get<nvmlShutdown_fn>(kShutdown)();
    initialized_ = false;
    return countFailure;
  }
  identities_.reserve(count);
  for (unsigned index = 0; index < count; ++index) identities_.push_back(ReadIdentity(symbols_, index));
  symbols_.Reading(-1);
  opened_ = true;
  return failure;
}

const char* SessionCore::LastSymbol() const {
  const int fn = symbols_.lastFn.load(std::memory_order_relaxed);
  if (fn < 0 || fn >= kFnCount) return nullptr;
  const char* bound = symbols_.Symbol(static_cast<Fn>(fn));
  return bound != nullptr ? bound : PreferredSymbol(static_cast<Fn>(fn));
}

OpenedSession SessionCore::Describe() const {
  OpenedSession opened;
  opened.path = library_.path;
  opened.versions = versions_;
  opened.boundSymbols.reserve(kFnCount);
  for (int fn = 0; fn < kFnCount; ++fn) {
    const char* symbol = symbols_.Symbol(static_cast<Fn>(fn));
    opened.boundSymbols.push_back(symbol != nullptr ? symbol : "");
  }
  opened.identities = identities_;
  return opened;
}

void SessionCore::Shutdown() {
  std::lock_guard<std::timed_mutex> lock(nvmlMutex);
  if (!initialized_) return;
  symbols_.Reading(-1);
  initialized_ = false;
  opened_ = false;
  symbols_.Get<nvmlShutdown_fn>(kShutdown)();
}

void SessionCore::ReadSnapshot(const SnapshotRequest& request, EncodedSnapshot* out) const {
  std::vector<DeviceReading> readings;
  if (request.allDevices) {
    readings.reserve(identities_.size());
    for (const DeviceIdentity& identity : identities_) readings.push_back(ReadDevice(symbols_, identity, request));
  } else {
    readings.reserve(request.devices.size());
    for (unsigned position : request.devices) {
      readings.push_back(ReadDevice(symbols_, identities_[position], request));
    }
  }
  EncodeSnapshot(readings, out);
}

void SessionCore::ReadAllMemory(double* out) const {
  for (const DeviceIdentity& identity : identities_) {
    symbols_.Reading(static_cast<int>(identity.index));
    MemoryReading memory;
    nvmlReturn_t code = identity.hasError ? identity.error.code : NVML_SUCCESS;
    if (!identity.hasError) {
      Fn failedFn = kDeviceGetMemoryInfo;
      code = ReadMemory(symbols_, identity.handle, &memory, &failedFn);
    }
    out[kMemoryTotal] = memory.totalBytes;
    out[kMemoryFree] = memory.freeBytes;
    out[kMemoryUsed] = memory.usedBytes;
    out[kMemoryReserved] = memory.reservedBytes;
    out[kMemoryReturn] = code;
    out += kMemorySlots;
  }
}

}  // namespace gpugate
