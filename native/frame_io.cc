// Frames over a stream socket (see frame_io.h).
#include "frame_io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cstdint>
#include <cstring>

#include "helper_protocol.h"

namespace gpugate {

namespace {

// Reads into `data` until at least `least` bytes have arrived, asking each time for up to `most`
// (so whatever has already arrived comes in one call); `*done` says how many were read.
FrameResult ReadAtLeast(int fd, char* data, size_t least, size_t most, long long deadlineNs, int* error, size_t* done) {
  *done = 0;
  while (*done < least) {
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
    const ssize_t got = recv(fd, data + *done, most - *done, 0);
    if (got == 0) return FrameResult::kClosed;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return FrameResult::kClosed;
      *error = errno;
      return FrameResult::kFailed;
    }
    *done += static_cast<size_t>(got);
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
  // One call reads the header and as much of the payload as has arrived (a request, or a reply of
  // a few GPUs, whole): each side sends one frame and then waits for the answer, so nothing can
  // follow it on the channel, and a byte that does is a broken peer.
  char first[kFirstReadBytes];
  size_t got = 0;
  FrameResult result = ReadAtLeast(fd, first, kFrameHeaderBytes, sizeof first, deadlineNs, error, &got);
  if (result != FrameResult::kDone) return result;
  uint32_t length = 0;
  std::memcpy(&length, first, sizeof length);
  if (length > kMaxFrameBytes) {
    *error = EMSGSIZE;
    return FrameResult::kFailed;
  }
  const size_t arrived = got - kFrameHeaderBytes;
  if (arrived > length) {
    *error = EPROTO;
    return FrameResult::kFailed;
  }
  out->assign(first + kFrameHeaderBytes, arrived);
  if (arrived == length) return FrameResult::kDone;
  out->resize(length);
  size_t rest = 0;
  return ReadAtLeast(fd, &(*out)[arrived], length - arrived, length - arrived, deadlineNs, error, &rest);
}

}  // namespace gpugate
