// The addon's side of the NVML helper process (see helper_client.h).
#include "helper_client.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "frame_io.h"
#include "helper_protocol.h"
#include "pidfd_syscalls.h"

extern char** environ;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace gpugate {

namespace {

constexpr const char* kHelperName = "gpugate-nvml-helper";
constexpr const char* kMissing = "GPUGATE_NVML_HELPER_MISSING";
constexpr const char* kCrashed = "GPUGATE_NVML_HELPER_CRASHED";
// Room in the helper's argv for its longest state line (process_title.h).
constexpr size_t kTitleRoom = 160;
// How long a helper that closed its channel (or answered a shutdown) gets to be reaped.
constexpr int kEndWaitMs = 2000;

std::string ErrnoText(int code) {
  char buffer[256];
  return strerror_r(code, buffer, sizeof buffer);  // GNU variant: returns the text
}

// Owned by root or by us, writable by nobody else: no other user can have put or changed it.
std::string OwnershipProblem(const struct stat& info) {
  if (info.st_uid != 0 && info.st_uid != geteuid()) {
    return "is owned by uid " + std::to_string(info.st_uid) + ", neither root nor this process's user";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "is writable by its group or by others";
  return "";
}

const char* SignalName(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return nullptr;
  }
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A descriptor moved to 10 or above (close-on-exec), out of the way of the helper's 3 and 4:
// dup2 onto its own number would leave close-on-exec set.
int AboveHelperFds(int fd) {
  if (fd < 0 || fd >= 10) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return moved;
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

// Whether the host ignores SIGPIPE (Node does): then a write to a gone helper's pipe is a plain
// EPIPE, and writes need no masking.
bool PipeSignalIgnored() {
  struct sigaction current {};
  return sigaction(SIGPIPE, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN;
}

void SendKill(int pidfd) {
  if (pidfd >= 0) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
}

}  // namespace

std::string LocateHelper() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&LocateHelper), &info) == 0 || info.dli_fname == nullptr) {
    throw CodedFailure(kMissing, "the addon cannot tell where its own file is (dladdr failed), so it cannot find " + std::string(kHelperName));
  }
  std::string addon = info.dli_fname;
  const size_t slash = addon.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : addon.substr(0, slash);
  const std::string path = folder + "/" + kHelperName;
  const std::string rebuild = " (rebuild the addon: npm run build:native, or reinstall the package)";
  struct stat folderInfo {};
  if (stat(folder.c_str(), &folderInfo) != 0) {
    throw CodedFailure(kMissing, "the addon's folder " + folder + " cannot be examined: " + ErrnoText(errno));
  }
  const std::string folderProblem = OwnershipProblem(folderInfo);
  if (!folderProblem.empty()) {
    throw CodedFailure(kMissing, "the NVML helper's folder " + folder + " " + folderProblem + "; the helper is not started from there");
  }
  struct stat fileInfo {};
  if (lstat(path.c_str(), &fileInfo) != 0) {
    throw CodedFailure(kMissing, "the NVML helper " + path + " is missing (" + ErrnoText(errno) + ")" + rebuild);
  }
  if (!S_ISREG(fileInfo.st_mode)) {
    throw CodedFailure(kMissing, "the NVML helper " + path + " is not a regular file (a symlink or other kind is never run)" + rebuild);
  }
  const std::string fileProblem = OwnershipProblem(fileInfo);
  if (!fileProblem.empty()) throw CodedFailure(kMissing, "the NVML helper " + path + " " + fileProblem + "; it is not run");
  if ((fileInfo.st_mode & S_IXUSR) == 0) throw CodedFailure(kMissing, "the NVML helper " + path + " is not executable" + rebuild);
  return path;
}

HelperProcess::HelperProcess(const std::string& path) {
  int requests[2] = {-1, -1};
  int replies[2] = {-1, -1};
  if (pipe2(requests, O_CLOEXEC) != 0 || pipe2(replies, O_CLOEXEC) != 0 || (hangUp_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
    const int error = errno;
    CloseAll({requests[0], requests[1], replies[0], replies[1], hangUp_});
    throw CodedFailure(kMissing, "could not create the NVML helper's channel: " + ErrnoText(error));
  }
  requestEnd_ = requests[1];
  replyEnd_ = replies[0];
  // Ours are non-blocking: the JavaScript thread never blocks on them, and the worker's waits
  // poll first (frame_io.h). The helper's stay blocking.
  fcntl(requestEnd_, F_SETFL, fcntl(requestEnd_, F_GETFL) | O_NONBLOCK);
  fcntl(replyEnd_, F_SETFL, fcntl(replyEnd_, F_GETFL) | O_NONBLOCK);
  quietPipe_ = !PipeSignalIgnored();
  const int childRequests = AboveHelperFds(requests[0]);
  const int childReplies = AboveHelperFds(replies[1]);
  if (childRequests < 0 || childReplies < 0) {
    const int error = errno;
    CloseAll({childRequests, childReplies, requestEnd_, replyEnd_, hangUp_});
    requestEnd_ = replyEnd_ = hangUp_ = -1;
    throw CodedFailure(kMissing, "could not create the NVML helper's channel: " + ErrnoText(error));
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, childRequests, kHelperRequestFd);
  posix_spawn_file_actions_adddup2(&actions, childReplies, kHelperReplyFd);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  // Its own process group: a terminal's ^C reaches gpugate, which decides; the helper follows
  // its parent (PR_SET_PDEATHSIG) or its channel's end.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::string name = kHelperName;
  std::string idle = "idle";
  std::string parent = std::to_string(getpid());
  std::string room(kTitleRoom, ' ');
  char* argv[] = {&name[0], &idle[0], &parent[0], &room[0], nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, path.c_str(), &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  CloseAll({childRequests, childReplies});
  if (spawned != 0) {
    CloseAll({requestEnd_, replyEnd_, hangUp_});
    requestEnd_ = replyEnd_ = hangUp_ = -1;
    throw CodedFailure(kMissing, "the NVML helper " + path + " could not be started: " + ErrnoText(spawned));
  }
  child_->pid = pid;
  child_->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (child_->pidfd < 0) {
    const int error = errno;
    kill(pid, SIGKILL);  // our unreaped child: its pid cannot have been reused
    waitpid(pid, nullptr, 0);
    child_->reaped = true;
    CloseAll({requestEnd_, replyEnd_, hangUp_});
    requestEnd_ = replyEnd_ = hangUp_ = -1;
    throw CodedFailure(kMissing, "pidfd_open on the NVML helper failed (" + ErrnoText(error) + "); Linux 5.3 or later is needed to run it");
  }
}

HelperProcess::~HelperProcess() {
  Abandon();  // no-op for a finished helper; else it must not outlive its session
  CloseAll({requestEnd_, replyEnd_, hangUp_});
}

bool HelperProcess::Reap(const std::shared_ptr<Child>& child, int waitMs) {
  {
    std::lock_guard<std::mutex> lock(child->mutex);
    if (child->reaped) return true;
  }
  pollfd watch{child->pidfd, POLLIN, 0};
  int ready;
  do ready = poll(&watch, 1, waitMs);
  while (ready < 0 && errno == EINTR);
  std::lock_guard<std::mutex> lock(child->mutex);
  if (child->reaped) return true;
  if (ready <= 0) return false;
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child->pidfd), &info, WEXITED) != 0) return false;
  if (info.si_code == CLD_EXITED) {
    child->end = "exited with status " + std::to_string(info.si_status);
  } else {
    const char* name = SignalName(info.si_status);
    child->end = std::string("was killed by ") + (name != nullptr ? name : "signal " + std::to_string(info.si_status)) +
                 (info.si_code == CLD_DUMPED ? " (core dumped)" : "");
  }
  child->reaped = true;
  close(child->pidfd);
  child->pidfd = -1;
  return true;
}

void HelperProcess::Died(const char* what) {
  {
    std::lock_guard<std::mutex> lock(abandonMutex_);
    if (abandoned_) throw CodedFailure("GPUGATE_SESSION_CLOSED", std::string(what) + ": the NVML session was abandoned");
  }
  HangUp();
  if (!Reap(child_, kEndWaitMs)) {
    {
      std::lock_guard<std::mutex> lock(child_->mutex);
      SendKill(child_->pidfd);
    }
    Reap(child_, kEndWaitMs);
  }
  std::string end;
  {
    std::lock_guard<std::mutex> lock(child_->mutex);
    end = child_->reaped ? child_->end : "closed its channel and did not end";
  }
  throw CodedFailure(kCrashed, "the NVML helper process (pid " + std::to_string(child_->pid) + ") " + end + " while answering " + what +
                                   "; the session is closed, the program goes on (open a new session to retry)");
}

std::string HelperProcess::Exchange(const std::string& request, double timeoutMs, const char* what) {
  const long long deadlineNs = timeoutMs < 0 ? -1 : MonotonicNs() + static_cast<long long>(timeoutMs * 1e6);
  // A request is a few bytes into a pipe the helper has emptied: its write waits only on a
  // helper that stopped reading, and that wait shares the reply's deadline.
  FrameResult result = WriteFrame(requestEnd_, request, Waiting(deadlineNs));
  std::string reply;
  int error = 0;
  if (result == FrameResult::kDone) result = ReadFrame(replyEnd_, &reply, Waiting(deadlineNs), &error);
  switch (result) {
    case FrameResult::kDone:
      return reply;
    case FrameResult::kTimedOut: {
      const HelperState state = State();
      throw CodedFailure("GPUGATE_TIMEOUT", std::string(what) + " got no answer from the NVML helper (pid " + std::to_string(state.pid) +
                                                ", state " + (state.state.empty() ? "?" : state.state) + ") within " +
                                                std::to_string(static_cast<long long>(timeoutMs)) + " ms");
    }
    case FrameResult::kFailed:
      ChannelEnded(what, error);
    case FrameResult::kClosed:
      Died(what);
  }
  Died(what);
}

void HelperProcess::ChannelEnded(const char* what, int error) {
  if (error == EMSGSIZE || error == EPROTO) {
    Abandon();
    throw CodedFailure("GPUGATE_NATIVE_FAILURE", std::string(what) + ": the NVML helper sent " +
                                                     (error == EMSGSIZE ? "a frame over the size limit" : "bytes after its reply, which the protocol never does") +
                                                     "; it was stopped");
  }
  Died(what);
}

void HelperProcess::DiscardReply() {
  std::string reply;
  int error = 0;
  ReadFrame(replyEnd_, &reply, Waiting(-1), &error);
}

void HelperProcess::Finish() {
  if (!Reap(child_, kEndWaitMs)) Abandon();
}

void HelperProcess::Abandon() {
  {
    std::lock_guard<std::mutex> lock(abandonMutex_);
    if (abandoned_) return;
    abandoned_ = true;
  }
  HangUp();
  {
    std::lock_guard<std::mutex> lock(child_->mutex);
    if (child_->reaped) return;
    SendKill(child_->pidfd);
  }
  // A helper stuck in the kernel ends only when its call returns: nobody waits for that here.
  std::shared_ptr<Child> child = child_;
  std::thread([child] { Reap(child, -1); }).detach();
}

void HelperProcess::HangUp() {
  if (hangUp_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = write(hangUp_, &one, sizeof one);
  }
  // Read-only: a write there later fails (EBADF) rather than vanishing into /dev/null.
  const int nothing = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (nothing >= 0) {
    if (requestEnd_ >= 0) dup3(nothing, requestEnd_, O_CLOEXEC);
    close(nothing);
  }
}

HelperState HelperProcess::State() const {
  HelperState state;
  state.pid = child_->pid;
  std::lock_guard<std::mutex> lock(child_->mutex);
  if (child_->reaped) return state;  // its pid may belong to another process now
  const std::string proc = "/proc/" + std::to_string(child_->pid);
  const std::string stat = ReadSmallFile(proc + "/stat");
  const size_t close = stat.rfind(')');
  if (close != std::string::npos && close + 2 < stat.size()) state.state = stat.substr(close + 2, 1);
  state.wchan = ReadSmallFile(proc + "/wchan");
  if (state.wchan == "0") state.wchan.clear();
  state.title = ReadSmallFile(proc + "/cmdline");
  while (!state.title.empty() && state.title.back() == '\0') state.title.pop_back();
  for (char& c : state.title) {
    if (c == '\0') c = ' ';
  }
  return state;
}

}  // namespace gpugate
