// Frames over a pipe each way (see frame_io.h).
#include "frame_io.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "helper_protocol.h"

namespace gpugate {

namespace {

enum class Ready { kGo, kHungUp, kTimedOut, kFailed };

// Waits until `fd` has `events`, the hang-up descriptor is readable, or the deadline passes.
Ready Await(int fd, short events, const FrameWait& wait, int* error) {
  for (;;) {
    int timeoutMs = -1;
    if (wait.deadlineNs >= 0) {
      const long long leftNs = wait.deadlineNs - MonotonicNs();
      if (leftNs <= 0) return Ready::kTimedOut;
      const long long leftMs = (leftNs + 999999) / 1000000;
      timeoutMs = leftMs > 2147483647 ? 2147483647 : static_cast<int>(leftMs);
    }
    pollfd watch[2] = {{fd, events, 0}, {wait.hangUp, POLLIN, 0}};
    const int ready = poll(watch, wait.hangUp >= 0 ? 2 : 1, timeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      *error = errno;
      return Ready::kFailed;
    }
    if (ready == 0) continue;  // the loop re-checks the deadline
    if (wait.hangUp >= 0 && watch[1].revents != 0) return Ready::kHungUp;
    return Ready::kGo;
  }
}

bool Waits(const FrameWait& wait) { return wait.deadlineNs >= 0 || wait.hangUp >= 0; }

FrameResult FromReady(Ready ready) {
  switch (ready) {
    case Ready::kHungUp: return FrameResult::kClosed;
    case Ready::kTimedOut: return FrameResult::kTimedOut;
    default: return FrameResult::kFailed;
  }
}

// Reads into `data` until at least `least` bytes have arrived, asking each time for up to `most`
// (so whatever has already arrived comes in one call); `*done` says how many were read.
FrameResult ReadAtLeast(int fd, char* data, size_t least, size_t most, const FrameWait& wait, int* error, size_t* done) {
  *done = 0;
  while (*done < least) {
    if (Waits(wait)) {
      const Ready ready = Await(fd, POLLIN, wait, error);
      if (ready != Ready::kGo) return FromReady(ready);
    }
    const ssize_t got = read(fd, data + *done, most - *done);
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

long WriteQuietly(int fd, const char* data, size_t size, bool quietPipe) {
  if (!quietPipe) return write(fd, data, size);
  sigset_t pipeSignal;
  sigset_t before;
  sigemptyset(&pipeSignal);
  sigaddset(&pipeSignal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipeSignal, &before);
  const ssize_t sent = write(fd, data, size);
  const int saved = errno;
  if (sent < 0 && errno == EPIPE) {
    // Take back the SIGPIPE this write raised, unless one was already pending before it.
    const timespec now{0, 0};
    if (!sigismember(&before, SIGPIPE)) sigtimedwait(&pipeSignal, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  errno = saved;
  return sent;
}

std::string EncodeFrame(const std::string& payload) {
  const uint32_t length = static_cast<uint32_t>(payload.size());
  std::string frame(reinterpret_cast<const char*>(&length), sizeof length);
  frame.append(payload);
  return frame;
}

FrameResult WriteFrame(int fd, const std::string& payload, const FrameWait& wait) {
  const std::string frame = EncodeFrame(payload);
  size_t done = 0;
  while (done < frame.size()) {
    const long sent = WriteQuietly(fd, frame.data() + done, frame.size() - done, wait.quietPipe);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && errno == EAGAIN && Waits(wait)) {
      int error = 0;
      const Ready ready = Await(fd, POLLOUT, wait, &error);
      if (ready != Ready::kGo) return FromReady(ready);
      continue;
    }
    if (sent <= 0) return FrameResult::kFailed;
    done += static_cast<size_t>(sent);
  }
  return FrameResult::kDone;
}

FrameResult ReadFrame(int fd, std::string* out, const FrameWait& wait, int* error) {
  // One call reads the header and as much of the payload as has arrived (a request, or a reply of
  // a few GPUs, whole): each side sends one frame and then waits for the answer, so nothing can
  // follow it on the channel, and a byte that does is a broken peer.
  char first[kFirstReadBytes];
  size_t got = 0;
  FrameResult result = ReadAtLeast(fd, first, kFrameHeaderBytes, sizeof first, wait, error, &got);
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
  return ReadAtLeast(fd, &(*out)[arrived], length - arrived, length - arrived, wait, error, &rest);
}

}  // namespace gpugate
