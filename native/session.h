// One NVML session: the loaded library, its symbol table, one nvmlInit, the device handles and
// identities read at open, and the mutex that keeps every NVML call of the session serial.
//
// This is the NVML side only (no Node-API here): session_api.cc runs these methods on the
// session's worker thread or, for the documented blocking variants, on the calling thread.
// Init is paired with exactly one nvmlShutdown, whichever path (close, environment teardown,
// or a late return after a poisoned call) gets there first.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "encode.h"
#include "health.h"
#include "loader.h"
#include "readings.h"
#include "symbols.h"

namespace gpugate {

struct OpenFailure {
  enum Kind { kNone, kLibraryNotFound, kFunctionNotFound, kNvml } kind = kNone;
  nvmlReturn_t code = NVML_SUCCESS;
  std::string symbol;
  std::string message;
  std::vector<LoadAttempt> attempts;  // for kLibraryNotFound
  std::string simulatorError;         // gpugateSimLastError() text, when the library is the simulator
};

struct LibraryVersions {
  std::string driverVersion;  // empty when unreadable
  std::string nvmlVersion;
  int cudaDriverVersion = -1;  // e.g. 13000; -1 when unreadable
};

// What an open session tells its caller: the library, its versions, which variant of each
// function bound (null for none) and the devices' identities. The addon turns it into the open
// result; the helper process sends it over its channel (helper_protocol.h).
struct OpenedSession {
  std::string path;
  LibraryVersions versions;
  std::vector<std::string> boundSymbols;  // by Fn; empty when nothing bound
  std::vector<DeviceIdentity> identities;  // `handle` is meaningful only in the process that opened
};

class SessionCore {
 public:
  // Loads, binds, initialises and reads identities. Call once, under no lock (takes its own).
  OpenFailure Open(const std::string& explicitPath);
  // nvmlShutdown once if init succeeded; idempotent.
  void Shutdown();

  // Reads a snapshot. The caller holds nvmlMutex.
  void ReadSnapshot(const SnapshotRequest& request, EncodedSnapshot* out) const;
  // Health readings of the device at `position` (below DeviceCount()). The caller holds nvmlMutex.
  HealthReading ReadDeviceHealth(size_t position) const { return ReadHealth(symbols_, identities_[position]); }
  // Memory of every device into `out` (one memory record each, wire_layout.h). The caller holds nvmlMutex.
  void ReadAllMemory(double* out) const;

  bool Opened() const { return opened_.load(); }
  size_t DeviceCount() const { return identities_.size(); }
  const std::vector<DeviceIdentity>& Identities() const { return identities_; }
  const LoadedLibrary& Library() const { return library_; }
  const SymbolTable& Symbols() const { return symbols_; }
  const LibraryVersions& Versions() const { return versions_; }
  // Where the session's NVML thread is (or was last): the exported symbol and device index,
  // null / -1 when none. Safe to read from any thread, e.g. after a missed deadline.
  const char* LastSymbol() const;
  int LastDevice() const { return symbols_.lastDevice.load(std::memory_order_relaxed); }
  // What the caller of Open learns (valid once Open succeeded).
  OpenedSession Describe() const;
  // Calls `observer` right before every NVML call (SymbolTable::callObserver); before Open only.
  void ObserveCalls(void (*observer)(const SymbolTable&, int)) { symbols_.callObserver = observer; }

  std::timed_mutex nvmlMutex;

 private:
  LoadedLibrary library_;
  SymbolTable symbols_;
  LibraryVersions versions_;
  std::vector<DeviceIdentity> identities_;
  bool initialized_ = false;  // guarded by nvmlMutex
  std::atomic<bool> opened_{false};
};

}  // namespace gpugate
