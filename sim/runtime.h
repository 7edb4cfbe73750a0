// The simulator's live state and the gate every NVML entry point passes through.
//
// Owns: the init reference count, the live scenario (base file + applied timeline entries),
// reload-on-rename, per-symbol call counters, fault evaluation, the device handle table and
// the last error text. The hot path (gate() with nothing pending) is a few relaxed atomics and
// one vDSO clock read; anything that may change state (stat of the scenario file, timeline
// triggers, faults) runs in the slow path under the mutex. Sleeps (delay, hang) never hold it.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "../native/nvml_abi.h"
#include "scenario.h"
#include "symbols.h"

// The opaque NVML device handle points at one of these (a fixed table: handles stay valid
// across scenario reloads, and a foreign pointer is recognised without dereferencing it).
struct gpugateNvmlDevice {
  int index;  // the GPU's NVML index
  int slot;   // -1 for the GPU itself, else the MIG device slot
};

namespace gpugate_sim {

/** The precise monotonic clock (used on the slow path to decide what is due). */
inline int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/**
 * The clock the hot path compares against: CLOCK_MONOTONIC_COARSE (same time base, read
 * without touching the TSC, a few ns) when its resolution is fine enough, else the precise
 * clock. The coarse clock lags by at most its resolution, so the hot path compares against
 * "next check minus resolution" and the slow path decides with the precise clock.
 */
inline int64_t hotClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Runtime {
  // --- hot-path atomics ---
  std::atomic<int> refCount{0};
  std::atomic<long long> counts[kSymbolCount];  // calls per symbol (their sum is the total)
  std::atomic<bool> callTriggersPending{false};  // an unapplied atCall timeline entry exists
  std::atomic<bool> faulty[kSymbolCount];          // a fault names this symbol
  std::atomic<int64_t> nextCheckNs{0};             // hot clock value at which the slow path must run
  clockid_t hotClock = CLOCK_MONOTONIC;            // set once in the constructor
  int64_t hotClockLagNs = 0;                       // how far the hot clock may lag the precise one

  // --- guarded by mu ---
  std::mutex mu;
  bool loaded = false;
  std::string path;
  struct FileId {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtimeNs = 0, ctimeNs = 0;
    bool operator==(const FileId& o) const {
      return dev == o.dev && ino == o.ino && size == o.size && mtimeNs == o.mtimeNs && ctimeNs == o.ctimeNs;
    }
  } fileId;
  Scenario live;
  std::vector<bool> applied;
  bool faultsChanged = true;  // live.faults changed since `faulty` was last computed
  // The scenario's own time origin and call-count base: set when nvmlInit reads a scenario
  // (not by a reload on rename, which continues the same run).
  bool originSet = false;
  int64_t originNs = 0;
  long long countBase[kSymbolCount] = {};
  int64_t nextStatNs = 0;
  std::string lastError;
  std::string lastPrinted;

  Runtime();
};

Runtime& runtime();

/** The handle for GPU `index` (slot -1) or its MIG slot. */
nvmlDevice_t handleFor(int index, int slot);

extern gpugateNvmlDevice g_gpuHandles[kMaxDevices];
extern gpugateNvmlDevice g_migHandles[kMaxDevices * kMaxMigSlots];

/** Decodes a handle by address only (never dereferencing it); false when it is not ours. */
inline bool decodeHandle(nvmlDevice_t h, int& index, int& slot) {
  uintptr_t p = reinterpret_cast<uintptr_t>(h);
  uintptr_t gpuBase = reinterpret_cast<uintptr_t>(&g_gpuHandles[0]);
  uintptr_t migBase = reinterpret_cast<uintptr_t>(&g_migHandles[0]);
  constexpr uintptr_t size = sizeof(gpugateNvmlDevice);
  if (p >= gpuBase && p < gpuBase + size * kMaxDevices && (p - gpuBase) % size == 0) {
    index = static_cast<int>((p - gpuBase) / size);
    slot = -1;
    return true;
  }
  if (p >= migBase && p < migBase + size * kMaxDevices * kMaxMigSlots && (p - migBase) % size == 0) {
    int n = static_cast<int>((p - migBase) / size);
    index = n / kMaxMigSlots;
    slot = n % kMaxMigSlots;
    return true;
  }
  return false;
}

/** The GPU index a handle belongs to (its parent for MIG handles), or -1. */
int handleDeviceIndex(nvmlDevice_t h);

/** Slow half of gate(): reload check, timeline, faults. */
bool gateSlow(int sym, int device, long long callIndex, nvmlReturn_t* rc);

/**
 * Every NVML entry point calls this first. Counts the call; returns true (with *rc set) when
 * the call must be answered now: UNINITIALIZED, or an injected fault. May sleep (delayMs) or
 * never return (hang) without holding any lock.
 */
inline bool gate(int sym, int device, nvmlReturn_t* rc) {
  Runtime& rt = runtime();
  long long index = rt.counts[sym].fetch_add(1, std::memory_order_relaxed);
  if (rt.refCount.load(std::memory_order_acquire) <= 0) {
    *rc = NVML_ERROR_UNINITIALIZED;
    return true;
  }
  if (!rt.callTriggersPending.load(std::memory_order_relaxed) && !rt.faulty[sym].load(std::memory_order_relaxed) &&
      hotClockNs(rt.hotClock) < rt.nextCheckNs.load(std::memory_order_relaxed)) {
    return false;
  }
  return gateSlow(sym, device, index, rc);
}

/** nvmlInit* (all variants). */
nvmlReturn_t initialize(int sym);

/** nvmlShutdown. */
nvmlReturn_t shutdown();

/** Records and prints (once per distinct text) an error line. Caller holds mu. */
void reportError(Runtime& rt, const std::string& message);

/** Writes the statistics file named by GPUGATE_SIM_STATS, if set. */
void writeStats();

/** Sleeps for `ms` milliseconds (restarting on signals). */
void sleepMs(int64_t ms);

}  // namespace gpugate_sim
