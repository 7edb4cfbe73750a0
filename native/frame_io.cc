// Frames over a stream socket (see frame_io.h).
#include "frame_io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cstdint>

#include "helper_protocol.h"

namespace gpugate {

namespace {

// Reads exactly `size` bytes.
FrameResult ReadExactly(int fd, char* data, size_t size, long long deadlineNs, int* error) {
  size_t done = 0;
  while (done < size) {
    if (deadlineNs >= 0) {
      const long long leftNs = deadlineNs - MonotonicNs();
      if (leftNs <= 0) return FrameResult::kTimedOut;
      pollfd watch{fd, POLLIN, 0};
      const long long leftMs = (leftNs + 999999) / 1000000;
      const int ready = poll(&watch, 1, leftMs > 2147483647 ? 2147483647 : static_cast<int>(leftMs));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) {
        *error = errno;
        return FrameResult::kFailed;
      }
      if (ready == 0) continue;  // the loop re-checks the deadline
    }
    const ssize_t got = recv(fd, data + done, size - done, 0);
    if (got == 0) return FrameResult::kClosed;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return FrameResult::kClosed;
      *error = errno;
      return FrameResult::kFailed;
    }
    done += static_cast<size_t>(got);
  }
  return FrameResult::kDone;
}

}  // namespace

long long MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

FrameResult WriteFrame(int fd, const std::string& payload) {
  const uint32_t length = static_cast<uint32_t>(payload.size());
  std::string frame(reinterpret_cast<const char*>(&length), sizeof length);
  frame.append(payload);
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t sent = send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return FrameResult::kFailed;
    done += static_cast<size_t>(sent);
  }
  return FrameResult::kDone;
}

FrameResult ReadFrame(int fd, std::string* out, long long deadlineNs, int* error) {
  uint32_t length = 0;
  FrameResult result = ReadExactly(fd, reinterpret_cast<char*>(&length), sizeof length, deadlineNs, error);
  if (result != FrameResult::kDone) return result;
  if (length > kMaxFrameBytes) {
    *error = EMSGSIZE;
    return FrameResult::kFailed;
  }
  out->resize(length);
  return length == 0 ? FrameResult::kDone : ReadExactly(fd, &(*out)[0], length, deadlineNs, error);
}

}  // namespace gpugate
