// The simulator's live state: init reference counting, scenario load and reload-on-rename,
// timeline application, fault evaluation and the handle table (see runtime.h).
#include "runtime.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "fault_actions.h"

namespace gpugate_sim {

gpugateNvmlDevice g_gpuHandles[kMaxDevices];
gpugateNvmlDevice g_migHandles[kMaxDevices * kMaxMigSlots];

namespace {
constexpr int64_t kStatIntervalNs = 5 * 1000 * 1000;  // re-check the scenario file at most every 5 ms
}  // namespace

Runtime::Runtime() {
  timespec res;
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0 && res.tv_nsec <= 4 * 1000 * 1000) {
    hotClock = CLOCK_MONOTONIC_COARSE;
    hotClockLagNs = res.tv_nsec;
  }
  for (auto& c : counts) c.store(0, std::memory_order_relaxed);
  for (auto& f : faulty) f.store(false, std::memory_order_relaxed);
  for (int i = 0; i < kMaxDevices; i++) {
    g_gpuHandles[i] = {i, -1};
    for (int s = 0; s < kMaxMigSlots; s++) g_migHandles[i * kMaxMigSlots + s] = {i, s};
  }
}

Runtime& runtime() {
  // Constructed on first use and never destroyed: entry points may run during process exit.
  static Runtime* instance = new Runtime();
  return *instance;
}

nvmlDevice_t handleFor(int index, int slot) {
  if (slot < 0) return &g_gpuHandles[index];
  return &g_migHandles[index * kMaxMigSlots + slot];
}

int handleDeviceIndex(nvmlDevice_t h) {
  int index, slot;
  return decodeHandle(h, index, slot) ? index : -1;
}

void reportError(Runtime& rt, const std::string& message) {
  rt.lastError = message;
  if (message != rt.lastPrinted) {
    fprintf(stderr, "gpugate-sim: %s\n", message.c_str());
    fflush(stderr);
    rt.lastPrinted = message;
  }
}

void sleepMs(int64_t ms) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>((ms % 1000) * 1000000);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

namespace {

bool statFile(const std::string& path, Runtime::FileId& id) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctimeNs = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return true;
}

// Before the anchor (a startedAt in the future) the clock reads 0: faults with no atMs are active.
int64_t elapsedMs(const Runtime& rt, int64_t now) { return rt.originSet && now > rt.originNs ? (now - rt.originNs) / 1000000 : 0; }

int64_t realtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/**
 * The monotonic clock's reading at wall-clock instant `unixNs`. Both clocks are read here, back to
 * back: a `now` taken before the scenario file was parsed would put the origin early by the parse
 * time (hundreds of ms under a sanitizer on a loaded machine) and run this reader's timeline ahead
 * of every other reader's.
 */
int64_t monotonicAt(int64_t unixNs) {
  int64_t mono = monotonicNs();
  return mono - (realtimeNs() - unixNs);
}

/**
 * Sets the timeline's origin (on the monotonic clock) from the anchor in force: the variable
 * GPUGATE_SIM_STARTED_AT, else the scenario's "startedAt", else the time the file was written.
 * A wall-clock anchor is the same instant for every process, so they all see the same phase.
 * The per-reader anchor ("init") starts at this process's init and is kept across reloads.
 * False (with an error reported) when the variable is malformed. Caller holds mu.
 */
bool anchorOrigin(Runtime& rt, int64_t now, bool atInit) {
  SimClockAnchor anchor = rt.live.startedAt;
  const char* env = getenv("GPUGATE_SIM_STARTED_AT");
  if (env != nullptr && env[0] != '\0' && !parseClockAnchor(env, anchor)) {
    reportError(rt, std::string("GPUGATE_SIM_STARTED_AT=") + env +
                        ": expected Unix milliseconds, an ISO 8601 UTC time like 2026-12-01T09:00:00Z, or init");
    return false;
  }
  switch (anchor.kind) {
    case SimClockAnchor::Kind::PerReader:
      if (atInit || !rt.originSet) rt.originNs = now;
      break;
    case SimClockAnchor::Kind::WallClock:
      rt.originNs = monotonicAt(anchor.unixNs);
      break;
    case SimClockAnchor::Kind::FileWritten:
      rt.originNs = monotonicAt(rt.fileId.mtimeNs);
      break;
  }
  rt.originSet = true;
  return true;
}

/** Empty when this library can serve `s`, else why not (its profile differs from the library's). */
std::string profileMismatch(const Runtime& rt, const Scenario& s) {
  if (s.system.profile == libraryProfile()) return "";
  return rt.path + ":" + std::to_string(s.system.profileLine) + ":" + std::to_string(s.system.profileColumn) +
         ": expected a driver of the " + profileName(libraryProfile()) + " profile, which this simulator library is built as; found " +
         s.system.driverVersion + " (the " + profileName(s.system.profile) + " profile): load the library built for it (sim/" +
         profileName(s.system.profile) + "/libnvidia-ml.so.1; `gpugate sim` picks it)";
}

bool entryReached(const Runtime& rt, const SimTimelineEntry& e, int64_t now) {
  if (e.byCall) {
    long long made = 0;
    if (e.function >= 0) {
      made = rt.counts[e.function].load(std::memory_order_relaxed) - rt.countBase[e.function];
    } else {
      for (int s = 0; s < kSymbolCount; s++) made += rt.counts[s].load(std::memory_order_relaxed) - rt.countBase[s];
    }
    return made > e.at;
  }
  return rt.originSet && now - rt.originNs >= e.at * 1000000;
}

void applyEntry(Runtime& rt, const SimTimelineEntry& e) {
  if (e.device == -1) {
    for (auto& d : rt.live.devices) applyDevicePatch(d, e.patch, e.mask);
  } else if (e.device >= 0 && static_cast<size_t>(e.device) < rt.live.devices.size()) {
    applyDevicePatch(rt.live.devices[static_cast<size_t>(e.device)], e.patch, e.mask);
  }
  if (e.setsFaults) {
    rt.live.faults = e.faults;
    rt.faultsChanged = true;
  }
}

/** Applies reached timeline entries (file order) and recomputes the hot-path flags. */
void advance(Runtime& rt, int64_t now) {
  bool pendingCalls = false;
  int64_t nextMsTrigger = kNever;
  for (size_t i = 0; i < rt.live.timeline.size(); i++) {
    if (rt.applied[i]) continue;
    const SimTimelineEntry& e = rt.live.timeline[i];
    if (entryReached(rt, e, now)) {
      applyEntry(rt, e);
      rt.applied[i] = true;
      continue;
    }
    if (e.byCall) {
      pendingCalls = true;
    } else if (rt.originSet) {
      int64_t at = rt.originNs + e.at * 1000000;
      if (at < nextMsTrigger) nextMsTrigger = at;
    }
  }
  for (int s = 0; rt.faultsChanged && s < kSymbolCount; s++) {
    bool any = false;
    for (const auto& f : rt.live.faults) {
      if (f.symbols[static_cast<size_t>(s)]) {
        any = true;
        break;
      }
    }
    rt.faulty[s].store(any, std::memory_order_relaxed);
  }
  rt.faultsChanged = false;
  rt.callTriggersPending.store(pendingCalls, std::memory_order_relaxed);
  int64_t next = rt.nextStatNs < nextMsTrigger ? rt.nextStatNs : nextMsTrigger;
  rt.nextCheckNs.store(next == kNever ? kNever : next - rt.hotClockLagNs, std::memory_order_relaxed);
}

/** Reads the scenario file into the live state: SUCCESS, or the code init answers. Caller holds mu. */
nvmlReturn_t load(Runtime& rt, int64_t now) {
  Scenario s;
  std::string error;
  Runtime::FileId id;
  bool haveId = statFile(rt.path, id);
  if (!readScenarioFile(rt.path, s, error)) {
    reportError(rt, error);
    return NVML_ERROR_UNKNOWN;
  }
  std::string mismatch = profileMismatch(rt, s);
  if (!mismatch.empty()) {
    reportError(rt, mismatch);
    return NVML_ERROR_UNKNOWN;
  }
  rt.live = std::move(s);
  rt.applied.assign(rt.live.timeline.size(), false);
  rt.faultsChanged = true;
  rt.fileId = haveId ? id : Runtime::FileId{};
  rt.loaded = true;
  rt.lastError.clear();
  rt.lastPrinted.clear();
  rt.nextStatNs = now + kStatIntervalNs;
  return NVML_SUCCESS;
}

/** Re-reads the file when it was replaced. Caller holds mu. */
void maybeReload(Runtime& rt, int64_t now) {
  rt.nextStatNs = now + kStatIntervalNs;
  Runtime::FileId id;
  if (!statFile(rt.path, id) || id == rt.fileId) return;
  Scenario s;
  std::string error;
  if (!readScenarioFile(rt.path, s, error)) {
    // Keep answering from the previous scenario; remember the file so the error prints once.
    rt.fileId = id;
    reportError(rt, error + " (the previous scenario stays in effect)");
    return;
  }
  std::string mismatch = profileMismatch(rt, s);
  if (!mismatch.empty()) {
    rt.fileId = id;
    reportError(rt, mismatch + " (the previous scenario stays in effect)");
    return;
  }
  rt.live = std::move(s);
  rt.applied.assign(rt.live.timeline.size(), false);
  rt.faultsChanged = true;
  rt.fileId = id;
  rt.lastError.clear();
  rt.lastPrinted.clear();
  anchorOrigin(rt, now, false);
}

struct FaultOutcome {
  bool hasReturn = false;
  int returnCode = 0;
  int64_t delayMs = 0;
  bool hang = false;
  std::string kernelBlock;  // the first matching fault's file
  int crashSignal = 0;      // the first matching fault's signal
};

FaultOutcome evaluateFaults(const Runtime& rt, int sym, int device, long long callIndex, int64_t now) {
  FaultOutcome out;
  int64_t ms = elapsedMs(rt, now);
  for (const auto& f : rt.live.faults) {
    if (!f.symbols[static_cast<size_t>(sym)]) continue;
    if (f.device >= 0 && f.device != device) continue;
    if (callIndex < f.fromCall || callIndex >= f.untilCall) continue;
    if (ms < f.atMs || ms >= f.untilMs) continue;
    out.delayMs += f.delayMs;
    out.hang = out.hang || f.hang;
    if (out.kernelBlock.empty()) out.kernelBlock = f.kernelBlock;
    if (out.crashSignal == 0) out.crashSignal = f.crashSignal;
    if (f.hasReturn && !out.hasReturn) {
      out.hasReturn = true;
      out.returnCode = f.returnCode;
    }
  }
  return out;
}

// In the order a driver would meet them: stuck in the kernel first, then dead, hung, slow or failing.
bool applyOutcome(const FaultOutcome& o, nvmlReturn_t* rc) {
  if (!o.kernelBlock.empty()) {
    std::string error;
    if (!writeThroughKernel(o.kernelBlock, error)) {
      Runtime& rt = runtime();
      std::lock_guard<std::mutex> lock(rt.mu);
      reportError(rt, error);
      *rc = NVML_ERROR_UNKNOWN;
      return true;
    }
  }
  if (o.crashSignal != 0) crashWith(o.crashSignal);
  if (o.hang) {
    for (;;) sleepMs(3600 * 1000);
  }
  if (o.delayMs > 0) sleepMs(o.delayMs);
  if (o.hasReturn) {
    *rc = o.returnCode;
    return true;
  }
  return false;
}

}  // namespace

bool gateSlow(int sym, int device, long long callIndex, nvmlReturn_t* rc) {
  Runtime& rt = runtime();
  FaultOutcome outcome;
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    if (rt.refCount.load(std::memory_order_relaxed) <= 0) {
      *rc = NVML_ERROR_UNINITIALIZED;
      return true;
    }
    int64_t now = monotonicNs();
    if (now >= rt.nextStatNs) maybeReload(rt, now);
    advance(rt, now);
    if (rt.faulty[sym].load(std::memory_order_relaxed)) {
      outcome = evaluateFaults(rt, sym, device, callIndex - rt.countBase[sym], now);
    }
  }
  return applyOutcome(outcome, rc);
}

nvmlReturn_t initialize(int sym) {
  Runtime& rt = runtime();
  long long callIndex = rt.counts[sym].fetch_add(1, std::memory_order_relaxed);
  FaultOutcome outcome;
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    int64_t now = monotonicNs();
    if (rt.refCount.load(std::memory_order_relaxed) <= 0) {
      const char* env = getenv("GPUGATE_SIM_SCENARIO");
      if (env == nullptr || env[0] == '\0') {
        reportError(rt, "GPUGATE_SIM_SCENARIO is not set; expected the path of a JSON scenario file");
        return NVML_ERROR_UNKNOWN;
      }
      Runtime::FileId id;
      bool changed = !rt.loaded || rt.path != env || !statFile(env, id) || !(id == rt.fileId);
      if (changed) {
        rt.path = env;
        nvmlReturn_t loaded = load(rt, now);
        if (loaded != NVML_SUCCESS) return loaded;
        // A scenario read at init sets its clock from its anchor and starts its call counts;
        // this init is call 0.
        if (!anchorOrigin(rt, now, true)) {
          rt.loaded = false;
          return NVML_ERROR_UNKNOWN;
        }
        for (int s = 0; s < kSymbolCount; s++) rt.countBase[s] = rt.counts[s].load(std::memory_order_relaxed);
        rt.countBase[sym] = callIndex;
      }
      rt.nextStatNs = now + kStatIntervalNs;
      advance(rt, now);
    }
    outcome = evaluateFaults(rt, sym, -1, callIndex - rt.countBase[sym], now);
  }
  nvmlReturn_t rc = NVML_SUCCESS;
  if (applyOutcome(outcome, &rc) && rc != NVML_SUCCESS) return rc;
  rt.refCount.fetch_add(1, std::memory_order_acq_rel);
  return NVML_SUCCESS;
}

nvmlReturn_t shutdown() {
  nvmlReturn_t rc;
  if (gate(kSym_nvmlShutdown, -1, &rc)) return rc;
  Runtime& rt = runtime();
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    int n = rt.refCount.load(std::memory_order_relaxed);
    if (n <= 0) return NVML_ERROR_UNINITIALIZED;
    rt.refCount.store(n - 1, std::memory_order_release);
    last = (n == 1);
  }
  if (last) writeStats();
  return NVML_SUCCESS;
}

}  // namespace gpugate_sim
