// waitpid(pid, WNOHANG) for one named child (see child_reap.h).
#include "child_reap.h"

#include <errno.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cmath>

namespace gpugate {

Napi::Value ReapChild(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const bool valid = info.Length() >= 1 && info[0].IsNumber();
  const double number = valid ? info[0].As<Napi::Number>().DoubleValue() : 0;
  if (!valid || !std::isfinite(number) || std::floor(number) != number || number < 2 || number > 4194304) {
    throw Napi::TypeError::New(env, "gpugate: argument 'pid' must be an integer from 2 to 4194304 (a child's pid)");
  }
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(static_cast<pid_t>(number), &status, WNOHANG);
  } while (reaped < 0 && errno == EINTR);
  return Napi::Boolean::New(env, reaped > 0);
}

}  // namespace gpugate
