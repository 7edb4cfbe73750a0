// The addon's side of the NVML helper process: finding the helper file next to the addon,
// spawning it, one request/reply exchange at a time, abandoning it, and learning how it died.
//
// Root safety: the helper is found only beside the addon's own file (dladdr), never through PATH
// or the environment, and refused unless it is a regular file owned by root or the effective
// user and writable by nobody else, in a directory of the same kind. It is spawned (posix_spawn,
// no fork of a threaded Node), inherits only its channel (a pipe each way: requests on fd 3,
// replies on fd 4; pipes cost a round trip less than a socket pair), and is held by a pidfd: it is
// signalled only through that, so a reused pid is never hit. It is reaped by whoever learns of
// its end first (the crash path or the detached reaper of an abandoned helper), never waited on
// by JavaScript.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "frame_io.h"

namespace gpugate {

// A failure with one of gpugate's documented codes (GPUGATE_TIMEOUT,
// GPUGATE_NVML_HELPER_CRASHED, GPUGATE_NVML_HELPER_MISSING, GPUGATE_SESSION_CLOSED...).
struct CodedFailure : std::runtime_error {
  CodedFailure(std::string code, const std::string& message) : std::runtime_error(message), code(std::move(code)) {}
  std::string code;
};

// What /proc says of the helper: its state letter (`D`: stuck in the kernel), wchan, and the
// command line it wrote (process_title.h). Empty strings when gone or unreadable.
struct HelperState {
  pid_t pid = -1;
  std::string state;
  std::string wchan;
  std::string title;
};

// The helper file beside this addon, checked; throws CodedFailure GPUGATE_NVML_HELPER_MISSING.
std::string LocateHelper();

class HelperProcess {
 public:
  // Spawns `path`; throws CodedFailure (GPUGATE_NVML_HELPER_MISSING when it cannot be started).
  explicit HelperProcess(const std::string& path);
  ~HelperProcess();
  HelperProcess(const HelperProcess&) = delete;
  HelperProcess& operator=(const HelperProcess&) = delete;

  // Sends `request` and returns the reply. `timeoutMs` < 0: no limit of its own (an asynchronous
  // call: the session's watchdog abandons the helper, which ends the wait). Throws CodedFailure:
  // GPUGATE_TIMEOUT (the deadline passed; the helper is left as it is for the caller to report
  // and abandon), GPUGATE_NVML_HELPER_CRASHED (it died or closed its channel; reaped, the signal
  // named), GPUGATE_SESSION_CLOSED (abandoned meanwhile). One exchange at a time (the caller's lock).
  std::string Exchange(const std::string& request, double timeoutMs, const char* what);
  // After a shutdown reply: waits briefly for the helper to exit and reaps it, else kills it.
  void Finish();
  // Any thread: hangs the channel up (HangUp), SIGKILL through the pidfd, and leaves the reaping
  // to a detached thread (a helper stuck in the kernel dies only when its call returns).
  void Abandon();
  pid_t Pid() const { return child_->pid; }
  // The addon's ends of the channel, for the JavaScript thread's own exchanges (direct_call.h),
  // both non-blocking; open until this object is destroyed.
  int ReplyEnd() const { return replyEnd_; }
  int RequestEnd() const { return requestEnd_; }
  // How a write on RequestEnd() must be made (frame_io.h: WriteQuietly).
  bool QuietPipe() const { return quietPipe_; }
  // The channel ended while `what` waited for its reply: kClosed (EOF, reset, or a write that
  // failed: `error` 0 or its errno) is the helper's death, reaped and named (CodedFailure
  // GPUGATE_NVML_HELPER_CRASHED, or GPUGATE_SESSION_CLOSED when abandoned meanwhile); EMSGSIZE (a
  // frame over the limit) or EPROTO (bytes after the reply): a broken helper, stopped
  // (GPUGATE_NATIVE_FAILURE). Always throws; may wait for the reaping.
  [[noreturn]] void ChannelEnded(const char* what, int error);
  // Waits (without limit) for the reply to a request sent from the JavaScript thread that nobody
  // will read there any more, and drops it; returns early when the channel ends or is abandoned.
  void DiscardReply();
  // The helper's /proc state while it is not reaped (its pid cannot be reused before that).
  HelperState State() const;

 private:
  // Shared with the detached reaper, which may outlive this object.
  struct Child {
    pid_t pid = -1;
    int pidfd = -1;
    std::mutex mutex;  // guards `reaped` and reads of /proc by pid
    bool reaped = false;
    std::string end;  // how it ended ("was killed by SIGSEGV", "exited with status 3"), once reaped
  };
  // Waits up to `waitMs` (< 0: forever) for the child to end, reaps it and records how.
  static bool Reap(const std::shared_ptr<Child>& child, int waitMs);
  [[noreturn]] void Died(const char* what);

  std::shared_ptr<Child> child_ = std::make_shared<Child>();
  // Any thread: every wait on the channel ends (the hang-up eventfd), and the request pipe's end
  // becomes a read-only /dev/null: the helper reads the end of its requests, and a later write
  // fails. The descriptor number stays ours, so no thread can write to a reused one.
  void HangUp();
  FrameWait Waiting(long long deadlineNs) const { return FrameWait{deadlineNs, hangUp_, quietPipe_}; }

  int replyEnd_ = -1;
  int requestEnd_ = -1;
  int hangUp_ = -1;
  bool quietPipe_ = false;
  bool abandoned_ = false;  // set by Abandon (any thread); read after a failed exchange
  std::mutex abandonMutex_;
};

}  // namespace gpugate
