// Process file descriptors: a handle on one process that a reused pid cannot redirect.
//
// pidfdOpen(pid) wraps pidfd_open(2) (Linux 5.3+) and pidfdSendSignal(fd, signo) wraps
// pidfd_send_signal(2) (Linux 5.1+), both through syscall() so no particular libc is needed.
// Synchronous; a failure throws an Error carrying the raw `errno` number (ENOSYS where the
// kernel lacks pidfds, ESRCH for a process that is gone) and the syscall name. Deciding what a
// failure means (fall back, skip) is the caller's. The descriptor is closed with fs.closeSync.
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value PidfdOpen(const Napi::CallbackInfo& info);
Napi::Value PidfdSendSignal(const Napi::CallbackInfo& info);

}  // namespace gpugate
