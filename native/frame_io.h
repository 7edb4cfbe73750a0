// Frames over a pipe each way (or any stream descriptor): a 32-bit length (host order) and that
// many bytes. Shared by the helper (blocking) and the addon (every wait bounded by a deadline or
// ended by its hang-up descriptor, see helper_client.cc).
#pragma once

#include <cstddef>
#include <string>

namespace gpugate {

// A frame's header: the payload's length, 32 bits in host order.
constexpr size_t kFrameHeaderBytes = 4;
// What the first read of a frame asks for: a request, or the reply of a few GPUs, fits whole, so
// a frame usually costs its reader one call. Also the largest frame written to a pipe in one
// piece (PIPE_BUF): the JavaScript thread sends only requests this small (direct_call.cc).
constexpr size_t kFirstReadBytes = 4096;

enum class FrameResult { kDone, kClosed, kTimedOut, kFailed };

// How a side waits. `hangUp`: a descriptor that becomes readable when the exchange is given up
// (helper_client.cc's eventfd; -1: none); the wait then ends as kClosed. With `hangUp` set or a
// deadline, the data descriptor may be non-blocking: every read waits in poll() first, and a write
// that would block waits there before it is tried again.
// `quietPipe`: a write to a pipe whose reader is gone must not raise SIGPIPE in this process
// (the addon: set when the host has not ignored SIGPIPE; Node ignores it).
struct FrameWait {
  long long deadlineNs = -1;  // CLOCK_MONOTONIC; < 0: no limit
  int hangUp = -1;
  bool quietPipe = false;
};

// `payload` with its frame header in front: what goes on the channel.
std::string EncodeFrame(const std::string& payload);
// Writes one frame whole (retrying short writes and EINTR). kFailed: the reader is gone (EPIPE)
// or writing failed; kClosed: hung up.
FrameResult WriteFrame(int fd, const std::string& payload, const FrameWait& wait = FrameWait());
// One write(2) that raises no SIGPIPE when `quietPipe` (the signal is blocked on this thread for
// the call and a pending one taken back); errno as write(2) leaves it.
long WriteQuietly(int fd, const char* data, size_t size, bool quietPipe);
// Reads one frame into `out`. kClosed: the peer closed (EOF) or reset the channel, or it was
// hung up; `*error` an errno on kFailed (EMSGSIZE: over kMaxFrameBytes; EPROTO: bytes after the
// frame, which the protocol never sends: each end sends one frame, then waits for the answer).
FrameResult ReadFrame(int fd, std::string* out, const FrameWait& wait, int* error);
long long MonotonicNs();

}  // namespace gpugate
