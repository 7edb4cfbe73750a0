// flock(fd, LOCK_EX | LOCK_NB) for the lease directory's lock file (see lease_lock.h).
#include "lease_lock.h"

#include <errno.h>
#include <string.h>
#include <sys/file.h>

#include <cmath>
#include <string>

namespace gpugate {

Napi::Value FlockExclusive(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const bool is_fd = info.Length() >= 1 && info[0].IsNumber() && [&] {
    const double number = info[0].As<Napi::Number>().DoubleValue();
    return std::isfinite(number) && std::floor(number) == number && number >= 0 && number <= 2147483647;
  }();
  if (!is_fd) throw Napi::TypeError::New(env, "gpugate: argument 'fd' must be an open file descriptor (an integer >= 0)");
  const int fd = static_cast<int>(info[0].As<Napi::Number>().Int64Value());
  int result;
  do {
    result = flock(fd, LOCK_EX | LOCK_NB);
  } while (result < 0 && errno == EINTR);
  if (result == 0) return Napi::Boolean::New(env, true);
  if (errno == EWOULDBLOCK) return Napi::Boolean::New(env, false);
  const int code = errno;
  char buffer[256];
  const std::string text = strerror_r(code, buffer, sizeof buffer);  // GNU variant: returns the text
  Napi::Error error = Napi::Error::New(env, "gpugate: flock(fd " + std::to_string(fd) + ", LOCK_EX|LOCK_NB) failed: " + text);
  error.Set("errno", Napi::Number::New(env, code));
  error.Set("syscall", Napi::String::New(env, "flock"));
  throw error;
}

}  // namespace gpugate
