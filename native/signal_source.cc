// Recording si_code / si_pid in front of the installed signal handler (see signal_source.h).
#include "signal_source.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include <atomic>
#include <cmath>
#include <string>

namespace gpugate {

namespace {

constexpr int kMaxSignal = 64;

struct Record {
  std::atomic<bool> seen{false};
  std::atomic<int> code{0};
  std::atomic<int> pid{0};
};

Record records[kMaxSignal + 1];
struct sigaction wrapped[kMaxSignal + 1];

// Async-signal-safe: lock-free atomics and a call into the wrapped handler.
void RecordingHandler(int signo, siginfo_t* info, void* context) {
  if (signo > 0 && signo <= kMaxSignal) {
    records[signo].code.store(info != nullptr ? info->si_code : 0);
    records[signo].pid.store(info != nullptr ? static_cast<int>(info->si_pid) : 0);
    records[signo].seen.store(true);
    const struct sigaction& next = wrapped[signo];
    if ((next.sa_flags & SA_SIGINFO) != 0) {
      if (next.sa_sigaction != nullptr) next.sa_sigaction(signo, info, context);
    } else if (next.sa_handler != SIG_DFL && next.sa_handler != SIG_IGN && next.sa_handler != nullptr) {
      next.sa_handler(signo);
    }
  }
}

int SignalArgument(const Napi::CallbackInfo& info) {
  const bool valid = info.Length() >= 1 && info[0].IsNumber();
  const double number = valid ? info[0].As<Napi::Number>().DoubleValue() : 0;
  if (!valid || !std::isfinite(number) || std::floor(number) != number || number < 1 || number > kMaxSignal) {
    throw Napi::TypeError::New(info.Env(), "gpugate: argument 'signal' must be a signal number from 1 to 64");
  }
  return static_cast<int>(number);
}

}  // namespace

Napi::Value WatchSignalSource(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int signo = SignalArgument(info);
  struct sigaction current;
  if (sigaction(signo, nullptr, &current) != 0) {
    throw Napi::Error::New(env, "gpugate: sigaction(" + std::to_string(signo) + ") failed: " + strerror(errno));
  }
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == RecordingHandler) return Napi::Boolean::New(env, false);
  if ((current.sa_flags & SA_SIGINFO) == 0 && (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    throw Napi::Error::New(env, "gpugate: signal " + std::to_string(signo) +
                                    " has no handler to wrap: add a process.on listener before watching its source");
  }
  wrapped[signo] = current;
  struct sigaction recording = current;
  recording.sa_sigaction = RecordingHandler;
  recording.sa_flags = current.sa_flags | SA_SIGINFO;
  if (sigaction(signo, &recording, nullptr) != 0) {
    throw Napi::Error::New(env, "gpugate: sigaction(" + std::to_string(signo) + ") failed: " + strerror(errno));
  }
  return Napi::Boolean::New(env, true);
}

Napi::Value LastSignalSource(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int signo = SignalArgument(info);
  if (!records[signo].seen.load()) return env.Null();
  Napi::Object result = Napi::Object::New(env);
  result.Set("code", Napi::Number::New(env, records[signo].code.load()));
  result.Set("pid", Napi::Number::New(env, records[signo].pid.load()));
  return result;
}

}  // namespace gpugate
