// The `kernelBlock` and `crash` faults' actions (see fault_actions.h).
#include "fault_actions.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace gpugate_sim {

namespace {

struct CrashSignal {
  const char* name;
  int number;
};

// The ways a library's bug ends a process: memory faults, a failed assertion, a bad instruction,
// arithmetic, a breakpoint left in, and the kernel's OOM killer.
constexpr CrashSignal kCrashSignals[] = {
    {"SIGSEGV", SIGSEGV}, {"SIGBUS", SIGBUS}, {"SIGABRT", SIGABRT}, {"SIGILL", SIGILL},
    {"SIGFPE", SIGFPE},   {"SIGTRAP", SIGTRAP}, {"SIGKILL", SIGKILL},
};

}  // namespace

bool writeThroughKernel(const std::string& path, std::string& error) {
  // O_NONBLOCK only for the open: a FIFO planted at the path must not hold the call in open().
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) {
    error = "kernelBlock: cannot open " + path + " (" + strerror(errno) + "); the call answers NVML_ERROR_UNKNOWN";
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    error = "kernelBlock: " + path + " is not a regular file; the call answers NVML_ERROR_UNKNOWN";
    return false;
  }
  if (fcntl(fd, F_SETFL, O_APPEND) != 0) {  // the write itself must block, as a driver's would
    error = "kernelBlock: cannot make " + path + " blocking (" + strerror(errno) + "); the call answers NVML_ERROR_UNKNOWN";
    close(fd);
    return false;
  }
  const char byte = 'k';
  ssize_t written;
  do {
    written = write(fd, &byte, 1);
  } while (written < 0 && errno == EINTR);
  int saved = errno;
  close(fd);
  if (written != 1) {
    error = "kernelBlock: cannot write to " + path + " (" + (written < 0 ? strerror(saved) : "nothing written") + "); the call answers NVML_ERROR_UNKNOWN";
    return false;
  }
  return true;
}

int crashSignalNumber(const std::string& name) {
  for (const auto& s : kCrashSignals) {
    if (name == s.name) return s.number;
  }
  return 0;
}

std::string crashSignalNames() {
  std::string out;
  for (const auto& s : kCrashSignals) {
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

void crashWith(int signal) {
  // A runtime may catch the signal (Node handles SIGSEGV for WebAssembly): restore the default
  // action so the process really dies of it, as it would of a bug in the driver.
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  raise(signal);
  // Unreachable for every signal in the table; should one ever be survived, still never answer.
  abort();
}

}  // namespace gpugate_sim
