// An advisory lock on an open file that the kernel drops when the descriptor closes or its
// process exits, however it exits: what serialises concurrent `gpugate select` runs while each
// one reads and writes the GPU lease records.
//
// flockExclusive(fd) wraps flock(fd, LOCK_EX | LOCK_NB): true when the lock is now held, false
// when another open file description holds it (EWOULDBLOCK). Any other failure throws an Error
// carrying the raw `errno` and the syscall name. Non-blocking, so the JavaScript thread never
// waits in the kernel; retrying and giving up are the caller's policy. Closing the descriptor
// (fs.closeSync) releases the lock.
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value FlockExclusive(const Napi::CallbackInfo& info);

}  // namespace gpugate
