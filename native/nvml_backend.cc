// The two places a session's NVML calls run (see nvml_backend.h).
#include "nvml_backend.h"

#include <cstdlib>
#include <cstring>

#include "helper_protocol.h"
#include "wire_layout.h"

namespace gpugate {

namespace {

class InProcessBackend : public NvmlBackend {
 public:
  OpenFailure Open(const std::string& libraryPath, OpenedSession* out) override {
    OpenFailure failure = core_.Open(libraryPath);
    if (failure.kind == OpenFailure::kNone) {
      *out = core_.Describe();
      deviceCount_ = core_.DeviceCount();
      opened_ = true;
    }
    return failure;
  }
  void Shutdown() override {
    opened_ = false;
    core_.Shutdown();
  }
  void ReadSnapshot(const SnapshotRequest& request, EncodedSnapshot* out, double /*timeoutMs*/) override {
    core_.ReadSnapshot(request, out);
  }
  HealthReading ReadHealth(size_t position) override { return core_.ReadDeviceHealth(position); }
  void ReadAllMemory(double* out, double /*timeoutMs*/) override { core_.ReadAllMemory(out); }
  CallSite CurrentCall() const override {
    CallSite site;
    const char* symbol = core_.LastSymbol();
    if (symbol != nullptr) site.fn = symbol;
    site.device = core_.LastDevice();
    return site;
  }
  void Abandon() override {}  // the stuck thread is detached by session_api.cc
  std::timed_mutex& Mutex() override { return core_.nvmlMutex; }

 private:
  SessionCore core_;
};

// Parses the helper's command line `gpugate-nvml-helper in <fn> gpu <n|-> since <ms>`.
void ParseTitle(const std::string& title, CallSite* site) {
  static const char kPrefix[] = "gpugate-nvml-helper in ";
  if (title.compare(0, sizeof kPrefix - 1, kPrefix) != 0) return;
  const size_t fnStart = sizeof kPrefix - 1;
  const size_t fnEnd = title.find(' ', fnStart);
  if (fnEnd == std::string::npos) return;
  site->fn = title.substr(fnStart, fnEnd - fnStart);
  static const char kGpu[] = " gpu ";
  if (title.compare(fnEnd, sizeof kGpu - 1, kGpu) != 0) return;
  const char* device = title.c_str() + fnEnd + sizeof kGpu - 1;
  if (*device >= '0' && *device <= '9') site->device = static_cast<int>(std::strtol(device, nullptr, 10));
}

class HelperBackend : public NvmlBackend {
 public:
  explicit HelperBackend(std::string path) : path_(std::move(path)) {}

  OpenFailure Open(const std::string& libraryPath, OpenedSession* out) override {
    std::lock_guard<std::timed_mutex> lock(mutex_);
    auto process = std::make_shared<HelperProcess>(path_);
    {
      std::lock_guard<std::mutex> guard(processMutex_);
      process_ = process;
      if (abandoned_) process->Abandon();  // abandoned while it was being started
    }
    const OpenFailure failure = DecodeOpenReply(process->Exchange(EncodeOpenRequest(libraryPath), -1, "open"), out);
    if (failure.kind == OpenFailure::kNone) {
      deviceCount_ = out->identities.size();
      opened_ = true;
    } else {
      Stop(*process);  // the helper shut NVML down (or never initialised it)
    }
    return failure;
  }

  void Shutdown() override {
    std::lock_guard<std::timed_mutex> lock(mutex_);
    opened_ = false;
    std::shared_ptr<HelperProcess> process = Process();
    if (process != nullptr) Stop(*process);
  }


  void ReadSnapshot(const SnapshotRequest& request, EncodedSnapshot* out, double timeoutMs) override {
    DecodeSnapshotReply(Ask(EncodeSnapshotRequest(request), timeoutMs, "snapshot"), out);
  }
  HealthReading ReadHealth(size_t position) override {
    return DecodeHealthReply(Ask(EncodeHealthRequest(static_cast<uint32_t>(position)), -1, "health"));
  }
  void ReadAllMemory(double* out, double timeoutMs) override {
    DecodeMemoryReply(Ask(EncodeReadMemoryRequest(), timeoutMs, "readMemory"), out, DeviceCount() * kMemorySlots);
  }

  CallSite CurrentCall() const override {
    CallSite site;
    std::shared_ptr<HelperProcess> process = Process();
    if (process == nullptr) return site;
    site.helper = process->State();
    ParseTitle(site.helper.title, &site);
    return site;
  }

  void Abandon() override {
    std::lock_guard<std::mutex> guard(processMutex_);
    abandoned_ = true;
    if (process_ != nullptr) process_->Abandon();
  }

  std::timed_mutex& Mutex() override { return mutex_; }

  std::shared_ptr<HelperProcess> DirectHelper() const override {
    if (!opened_ || late_) return nullptr;
    return Process();
  }
  void DirectCallFailed() override {
    opened_ = false;
    late_ = true;
  }

 private:
  std::shared_ptr<HelperProcess> Process() const {
    std::lock_guard<std::mutex> guard(processMutex_);
    return stopped_ ? nullptr : process_;
  }

  // One exchange; a helper that died leaves the session closed.
  std::string Ask(const std::string& request, double timeoutMs, const char* what) {
    std::shared_ptr<HelperProcess> process = Process();
    if (process == nullptr) throw CodedFailure("GPUGATE_SESSION_CLOSED", "the NVML session is not open");
    try {
      return process->Exchange(request, timeoutMs, what);
    } catch (const CodedFailure&) {
      // Died, abandoned, or late: a late reply would answer the next request, so nothing more is
      // asked of this helper (the caller abandons it; a shutdown then only kills it).
      opened_ = false;
      late_ = true;
      throw;
    }
  }

  // Shutdown request, then the helper's exit, reaped; a helper that is gone already stays gone.
  void Stop(HelperProcess& process) {
    if (late_) {
      process.Abandon();
      std::lock_guard<std::mutex> guard(processMutex_);
      stopped_ = true;
      return;
    }
    try {
      process.Exchange(EncodeShutdownRequest(), -1, "nvmlShutdown");
      process.Finish();
    } catch (const CodedFailure&) {
      // Died or abandoned meanwhile: nothing left to shut down.
    }
    std::lock_guard<std::mutex> guard(processMutex_);
    stopped_ = true;
  }

  const std::string path_;
  std::timed_mutex mutex_;
  mutable std::mutex processMutex_;
  std::shared_ptr<HelperProcess> process_;  // set by Open, under processMutex_
  bool abandoned_ = false;                  // under processMutex_
  bool stopped_ = false;                    // shut down and reaped: its pid is not ours to read
  std::atomic<bool> late_{false};           // an exchange failed: the channel may hold a late reply
};

}  // namespace

std::shared_ptr<NvmlBackend> MakeBackend(bool inHelper) {
  if (!inHelper) return std::make_shared<InProcessBackend>();
  return std::make_shared<HelperBackend>(LocateHelper());
}

}  // namespace gpugate
