// sd_notify without libsystemd: one unix datagram to $NOTIFY_SOCKET.
//
// Node's dgram module has no unix-domain sockets, so the CLI sends READY=1 / STATUS= / EXTEND_TIMEOUT_USEC=
// through this. A leading '@' names a socket in the abstract namespace. Synchronous; throws a clear
// Error naming the socket and the system error on failure.
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value SendNotify(const Napi::CallbackInfo& info);

}  // namespace gpugate
