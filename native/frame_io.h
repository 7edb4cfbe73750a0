// Frames over a stream socket: a 32-bit length (host order) and that many bytes. Shared by the
// helper (blocking) and the addon (every wait bounded by a deadline, see helper_client.cc).
#pragma once

#include <cstddef>
#include <string>

namespace gpugate {

// A frame's header: the payload's length, 32 bits in host order.
constexpr size_t kFrameHeaderBytes = 4;
// What the first read of a frame asks for: a request, or the reply of a few GPUs, fits whole, so
// a frame usually costs its reader one call.
constexpr size_t kFirstReadBytes = 4096;

enum class FrameResult { kDone, kClosed, kTimedOut, kFailed };

// Writes one frame whole (retrying short writes and EINTR); MSG_NOSIGNAL, so a closed peer is
// kFailed, never SIGPIPE.
FrameResult WriteFrame(int fd, const std::string& payload);
// Reads one frame into `out`, waiting at most until `deadlineNs` (CLOCK_MONOTONIC; < 0: no
// limit). kClosed: the peer closed (EOF) or reset the channel; `*error` an errno on kFailed
// (EMSGSIZE: over kMaxFrameBytes; EPROTO: bytes after the frame, which the protocol never sends:
// each end sends one frame, then waits for the answer).
FrameResult ReadFrame(int fd, std::string* out, long long deadlineNs, int* error);
long long MonotonicNs();

}  // namespace gpugate
