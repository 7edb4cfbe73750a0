// Who sent a signal: the siginfo that Node's process.on(signal) does not pass on.
//
// watchSignalSource(signo) wraps the handler currently installed for signo (libuv's, once a
// process.on listener exists) in an SA_SIGINFO handler that records si_code and si_pid, then
// calls the wrapped handler, so JavaScript listeners still run. lastSignalSource(signo) returns
// the record of the latest delivery ({ code, pid }) or null. The record is process-wide (signals
// are); what a sender means is decided in TypeScript (src/cli/run-wrapped.ts).
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value WatchSignalSource(const Napi::CallbackInfo& info);
Napi::Value LastSignalSource(const Napi::CallbackInfo& info);

}  // namespace gpugate
