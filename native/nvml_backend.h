// Where a session's NVML calls run: in this process (the worker thread or the calling thread,
// as before) or in the session's helper process (helper_client.h). session_api.cc talks to this
// interface only, so the two modes share the argument checks, promises, deadlines and the
// conversion to JavaScript; they differ in the transport alone.
//
// Threads: Open / Shutdown / the readings run on the session's worker thread or, for the
// blocking calls, on the JavaScript thread, always under Mutex() (Open and Shutdown take it
// themselves). CurrentCall and Abandon may be called from the JavaScript thread at any time.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "encode.h"
#include "health.h"
#include "helper_client.h"
#include "readings.h"
#include "session.h"

namespace gpugate {

// Where the session's NVML calls are (or were last): the exported symbol and device, and for the
// helper mode its pid and /proc state.
struct CallSite {
  std::string fn;   // empty when none
  int device = -1;  // -1 when none
  HelperState helper;
};

class NvmlBackend {
 public:
  virtual ~NvmlBackend() = default;
  virtual OpenFailure Open(const std::string& libraryPath, OpenedSession* out) = 0;
  // nvmlShutdown once if init succeeded; idempotent.
  virtual void Shutdown() = 0;
  // `timeoutMs` < 0: no limit of the call's own (the session's watchdog abandons a late call).
  // A call that misses a limit throws CodedFailure GPUGATE_TIMEOUT; a helper that died, CodedFailure
  // GPUGATE_NVML_HELPER_CRASHED.
  virtual void ReadSnapshot(const SnapshotRequest& request, EncodedSnapshot* out, double timeoutMs) = 0;
  virtual HealthReading ReadHealth(size_t position) = 0;
  virtual void ReadAllMemory(double* out, double timeoutMs) = 0;
  virtual CallSite CurrentCall() const = 0;
  // After a missed deadline: whatever is stuck is left behind, never waited for.
  virtual void Abandon() = 0;
  virtual std::timed_mutex& Mutex() = 0;
  // The helper mode's direct path (direct_call.h): the helper the JavaScript thread may send to
  // itself, or null (in-process; not open; an exchange failed, so a late reply may be waiting).
  virtual std::shared_ptr<HelperProcess> DirectHelper() const { return nullptr; }
  // A direct exchange ended without its reply, or was given up: as after a failed exchange of the
  // worker's, the session is no longer open and nothing more is asked of the helper.
  virtual void DirectCallFailed() {}
  bool Opened() const { return opened_.load(); }
  size_t DeviceCount() const { return deviceCount_.load(); }

 protected:
  std::atomic<bool> opened_{false};
  std::atomic<size_t> deviceCount_{0};
};

// `inHelper`: the helper process (its file checked here: throws CodedFailure
// GPUGATE_NVML_HELPER_MISSING); else this process.
std::shared_ptr<NvmlBackend> MakeBackend(bool inHelper);

}  // namespace gpugate
