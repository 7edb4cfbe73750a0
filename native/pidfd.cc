// pidfd_open / pidfd_send_signal through syscall() (see pidfd.h).
#include "pidfd.h"
#include "pidfd_syscalls.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <string>


namespace gpugate {

namespace {

bool IsIntegerIn(const Napi::Value& value, double low, double high) {
  if (!value.IsNumber()) return false;
  const double number = value.As<Napi::Number>().DoubleValue();
  return std::isfinite(number) && std::floor(number) == number && number >= low && number <= high;
}

[[noreturn]] void ThrowSystemError(Napi::Env env, const char* syscall, int code, const std::string& what) {
  char buffer[256];
  const std::string text = strerror_r(code, buffer, sizeof buffer);  // GNU variant: returns the text
  Napi::Error error = Napi::Error::New(env, std::string("gpugate: ") + syscall + "(" + what + ") failed: " + text);
  error.Set("errno", Napi::Number::New(env, code));
  error.Set("syscall", Napi::String::New(env, syscall));
  throw error;
}

}  // namespace

Napi::Value PidfdOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !IsIntegerIn(info[0], 1, 4194304)) {
    throw Napi::TypeError::New(env, "gpugate: argument 'pid' must be an integer from 1 to 4194304 (pid_max)");
  }
  const pid_t pid = static_cast<pid_t>(info[0].As<Napi::Number>().Int64Value());
  long fd;
  do {
    fd = syscall(SYS_pidfd_open, pid, 0);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) ThrowSystemError(env, "pidfd_open", errno, "pid " + std::to_string(pid));
  return Napi::Number::New(env, static_cast<double>(fd));
}

Napi::Value PidfdSendSignal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !IsIntegerIn(info[0], 0, 2147483647)) {
    throw Napi::TypeError::New(env, "gpugate: argument 'fd' must be a file descriptor from pidfdOpen");
  }
  if (info.Length() < 2 || !IsIntegerIn(info[1], 0, 64)) {
    throw Napi::TypeError::New(env, "gpugate: argument 'signal' must be a signal number from 0 to 64");
  }
  const int fd = static_cast<int>(info[0].As<Napi::Number>().Int64Value());
  const int signo = static_cast<int>(info[1].As<Napi::Number>().Int64Value());
  long result;
  do {
    result = syscall(SYS_pidfd_send_signal, fd, signo, nullptr, 0);
  } while (result < 0 && errno == EINTR);
  if (result < 0) ThrowSystemError(env, "pidfd_send_signal", errno, "fd " + std::to_string(fd) + ", signal " + std::to_string(signo));
  return env.Undefined();
}

}  // namespace gpugate
