// sd_notify without libsystemd: one unix datagram to $NOTIFY_SOCKET (see notify.h).
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>

namespace gpugate {

namespace {

std::string SystemError(int code) {
  char buffer[256];
  // GNU strerror_r returns the text (possibly not in buffer).
  return strerror_r(code, buffer, sizeof buffer);
}

}  // namespace

Napi::Value SendNotify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    throw Napi::TypeError::New(env, "gpugate: argument 'socketPath' must be a string (the value of NOTIFY_SOCKET)");
  }
  if (info.Length() < 2 || !info[1].IsString()) {
    throw Napi::TypeError::New(env, "gpugate: argument 'text' must be a string such as 'READY=1'");
  }
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  const std::string text = info[1].As<Napi::String>().Utf8Value();

  sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  if (path.empty() || (path[0] != '/' && path[0] != '@')) {
    throw Napi::Error::New(env, "gpugate: NOTIFY_SOCKET '" + path +
                                    "' is not a unix socket path: expected an absolute path or '@' followed by an abstract name");
  }
  if (path.size() >= sizeof address.sun_path) {
    throw Napi::Error::New(env, "gpugate: NOTIFY_SOCKET '" + path + "' is longer than a unix socket path may be (" +
                                    std::to_string(sizeof address.sun_path - 1) + " bytes)");
  }
  memcpy(address.sun_path, path.data(), path.size());
  socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (path[0] == '@') {
    address.sun_path[0] = '\0';  // abstract namespace: no trailing NUL counted
  } else {
    length += 1;
  }

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Napi::Error::New(env, "gpugate: cannot create a unix datagram socket: " + SystemError(errno));
  ssize_t sent;
  do {
    sent = sendto(fd, text.data(), text.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&address), length);
  } while (sent < 0 && errno == EINTR);
  const int error = errno;
  close(fd);
  if (sent < 0) {
    throw Napi::Error::New(env, "gpugate: sending '" + text + "' to NOTIFY_SOCKET '" + path + "' failed: " + SystemError(error));
  }
  return env.Undefined();
}

}  // namespace gpugate
