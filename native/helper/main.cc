// gpugate-nvml-helper: runs one NVML session for the addon that spawned it, out of its process.
//
// The addon (helper_client.cc) spawns it with its channel as fds 3 (requests in) and 4 (replies
// out), a pipe each way, /dev/null on 0-2, default signal dispositions and an empty mask, and
// `argv` = { name, "idle", parent pid, padding }. It serves requests (helper_protocol.h) one at
// a time until the channel closes or a shutdown request, and it dies with its parent
// (PR_SET_PDEATHSIG). What it is doing is its command line (process_title.h). A driver call
// stuck in the kernel leaves only this process stuck; a crash inside the library ends only this
// process, and the addon reports the signal.
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "../frame_io.h"
#include "../helper_protocol.h"
#include "../session.h"
#include "process_title.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace {

using gpugate::kHelperReplyFd;
using gpugate::kHelperRequestFd;

// Exit codes (the addon reports them if the helper ends before answering).
constexpr int kExitUsage = 64;       // not started by the addon (no channel, wrong arguments)
constexpr int kExitParentGone = 65;  // the parent died before PR_SET_PDEATHSIG took hold

// Every descriptor but 0-4 is closed: the helper holds nothing of its parent but its channel.
void CloseInherited() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, kHelperReplyFd + 1, ~0U, 0) == 0) return;
#endif
  const long limit = sysconf(_SC_OPEN_MAX);
  for (long fd = kHelperReplyFd + 1; fd < (limit > 0 ? limit : 1024); ++fd) close(static_cast<int>(fd));
}

// A pipe or a stream socket (a test may start the helper on sockets); anything else, or nothing,
// means it was not started by the addon.
bool IsChannel(int fd) {
  struct stat info {};
  return fstat(fd, &info) == 0 && (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode));
}

// posix_spawn resets every signal glibc lets it name; the two glibc keeps for itself (32, 33)
// stay ignored when the parent ignored them. The raw system call resets those too: a zeroed
// kernel sigaction is SIG_DFL with no flags and an empty mask on every architecture.
void DefaultEverySignal() {
  for (int signal = 1; signal <= 64; ++signal) {
    if (signal == SIGKILL || signal == SIGSTOP) continue;
    unsigned long action[4] = {};
    syscall(SYS_rt_sigaction, signal, action, nullptr, 8);
  }
}

void OnNvmlCall(const gpugate::SymbolTable& table, int fn) {
  const auto which = static_cast<gpugate::Fn>(fn);
  const char* symbol = table.Symbol(which);
  gpugate::ShowCallInTitle(symbol != nullptr ? symbol : gpugate::PreferredSymbol(which),
                           table.lastDevice.load(std::memory_order_relaxed));
}

}  // namespace

int main(int argc, char** argv) {
  CloseInherited();
  DefaultEverySignal();
  if (argc < 3 || !IsChannel(kHelperRequestFd) || !IsChannel(kHelperReplyFd)) return kExitUsage;
  const long parent = strtol(argv[2], nullptr, 10);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return kExitUsage;
  if (getppid() != parent) return kExitParentGone;  // died before the line above: nobody to serve
  if (!gpugate::TakeProcessTitle(argc, argv)) return kExitUsage;
  gpugate::ShowIdleInTitle();

  gpugate::SessionCore core;
  core.ObserveCalls(OnNvmlCall);
  for (;;) {
    std::string request;
    int error = 0;
    if (gpugate::ReadFrame(kHelperRequestFd, &request, gpugate::FrameWait(), &error) != gpugate::FrameResult::kDone) break;
    bool shutdown = false;
    const std::string reply = gpugate::HandleRequest(core, request, &shutdown);
    gpugate::ShowIdleInTitle();
    // With its signals at their defaults, a reply to an addon that is gone ends the helper by
    // SIGPIPE, which is what the addon's end means (it is abandoned or exiting).
    if (gpugate::WriteFrame(kHelperReplyFd, reply) != gpugate::FrameResult::kDone || shutdown) break;
  }
  // The channel closed without a shutdown request (the addon's process ended): still pair the init.
  core.Shutdown();
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer build's leak check of the helper (npm run test:asan): recoverable, into the log,
  // since the runner turns the at-exit check off so that no process's exit status changes.
  __lsan_do_recoverable_leak_check();
#endif
  return 0;
}
