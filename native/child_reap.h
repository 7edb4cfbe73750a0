// Reaping one exited child: what an init (PID 1) must do for orphans the kernel hands it.
//
// reapChild(pid) is waitpid(pid, WNOHANG) for one named pid: true when that child was reaped,
// false when it has not exited or is not a child of this process. It never waits on "any
// child", so libuv keeps reaping the children it spawned itself. Which pids to reap is decided
// in TypeScript (src/cli/orphan-reaper.ts).
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value ReapChild(const Napi::CallbackInfo& info);

}  // namespace gpugate
