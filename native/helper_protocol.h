// The requests and replies between the addon and its NVML helper process, and the helper's
// request handler. One frame is a 32-bit length and that many bytes (byte_codec.h); the first
// byte of a request names it, the first byte of a reply says how it went. Each record is written
// and read by a pair of functions next to each other in helper_protocol.cc, so the two ends
// cannot drift apart; the addon decodes into the same records (session.h, encode.h, health.h)
// that the in-process mode reads directly, and session_api.cc turns those into JavaScript.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "encode.h"
#include "health.h"
#include "readings.h"
#include "session.h"

namespace gpugate {

enum class RequestKind : uint8_t { kOpen = 1, kSnapshot = 2, kHealth = 3, kReadMemory = 4, kShutdown = 5 };
enum class ReplyKind : uint8_t { kDone = 0, kOpenFailed = 1, kThrew = 2, kNotOpen = 3 };

// The helper's ends of its channel, a pipe each way: it reads requests on one and writes replies
// on the other (helper_client.cc sets them up, helper/main.cc uses them).
constexpr int kHelperRequestFd = 3;
constexpr int kHelperReplyFd = 4;

// The largest frame either end accepts (a snapshot of many GPUs with many processes fits easily).
constexpr uint32_t kMaxFrameBytes = 256u << 20;

// A request the helper could not answer: it threw (kThrew: `what()` is its text) or the session
// was not open there (kNotOpen).
struct HelperRefusal : std::runtime_error {
  HelperRefusal(ReplyKind kind, const std::string& text) : std::runtime_error(text), kind(kind) {}
  ReplyKind kind;
};

// Requests (the addon).
std::string EncodeOpenRequest(const std::string& libraryPath);
std::string EncodeSnapshotRequest(const SnapshotRequest& request);
std::string EncodeHealthRequest(uint32_t position);
std::string EncodeReadMemoryRequest();
std::string EncodeShutdownRequest();

// The helper's handler: one request in, one reply out. `*shutdown` is set by a shutdown request
// (NVML is shut down by then). Never throws: what a reading throws is the reply kThrew.
std::string HandleRequest(SessionCore& core, const std::string& request, bool* shutdown);

// Replies (the addon). Each throws HelperRefusal for kThrew / kNotOpen, std::runtime_error for a
// garbled frame.
OpenFailure DecodeOpenReply(const std::string& reply, OpenedSession* out);
void DecodeSnapshotReply(const std::string& reply, EncodedSnapshot* out);
HealthReading DecodeHealthReply(const std::string& reply);
// `out` holds `slots` doubles (kMemorySlots per device of the session).
void DecodeMemoryReply(const std::string& reply, double* out, size_t slots);

}  // namespace gpugate
