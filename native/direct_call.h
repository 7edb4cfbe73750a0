// The helper mode's direct path: an awaited call that finds the session idle is sent by the
// JavaScript thread itself, and libuv polls the helper's channel for the reply, so the round trip
// wakes two threads (this one and the helper), as the in-process mode does, where the worker
// thread's hand-off wakes four.
//
// One DirectChannel per session, created on its first direct call and used on the JavaScript
// thread only. It is transport alone: one request frame out (non-blocking, into the request pipe
// whole: at most PIPE_BUF bytes), one reply frame in from the reply pipe (non-blocking,
// reassembled across callbacks), then `Done` runs inside a handle scope and a callback scope (so
// the promise it settles runs its reactions). session_api.cc decides when a call may go this
// way, decodes the reply with the worker path's decoders and names a helper's death the way the
// worker does.
//
// Ordering: at most one call in flight; what the session is asked meanwhile is held here
// (Defer) and handed to the worker thread, in order, once the call has settled. Never two
// requests on the channel, never a frame interleaved with the worker's.
//
// Lifetime: the uv_poll_t lives in a block of its own, freed by uv_close's callback; it holds the
// helper (so the descriptor stays open until libuv has let it go). It is referenced (keeps the
// loop alive) only while a call is in flight, so an idle session never keeps Node alive; it stays
// started between calls (no epoll change per call) and is stopped when the channel turns
// readable with no call of ours out (the worker's reply, or the helper's end). Close() (close,
// abandon, finalisation, teardown) and an async environment cleanup hook (main thread or
// worker_threads teardown) both close it; a call in flight then never settles here (its deadline
// or the session's poisoning has answered it, as for a worker call dropped by abandon), and its
// reply is left to the worker thread, or its helper to the kill.
#pragma once

#include <napi.h>
#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "helper_client.h"

namespace gpugate {

class DirectChannel {
 public:
  // How the exchange ended: the reply arrived (kReply), the helper closed or reset the channel
  // (kClosed), or reading failed (kFailed: `error` an errno, EMSGSIZE for a frame over the limit).
  enum class End { kReply, kClosed, kFailed };
  using Done = std::function<void(Napi::Env env, End end, const std::string& reply, int error)>;

  // What Close() left on the channel: nothing, or a request whose reply is still to come.
  enum class Left { kNothing, kReply };

  DirectChannel(napi_env env, std::shared_ptr<HelperProcess> helper);
  ~DirectChannel();
  DirectChannel(const DirectChannel&) = delete;
  DirectChannel& operator=(const DirectChannel&) = delete;

  // Sends `request` and waits (on the loop) for its reply. False when it was not sent (the pipe
  // took nothing at once, the request is over PIPE_BUF, or the handle could not be made): the
  // caller uses the worker thread instead, whose exchange then meets the same channel.
  bool Send(const std::string& request, Done done);
  // A call is in flight, or its promise is being settled (what that asks is deferred behind).
  bool Busy() const { return busy_ || settling_; }
  // Whether a new call may be sent now: none in flight, and not while a blocking call settles
  // one (the blocking call's own exchange comes next). The reactions of a reply read on the loop
  // may send the next call themselves: an `await` loop alternated between this path and the
  // worker thread when they could not.
  bool TakesCall() const { return !closed_ && !busy_ && !closeWhenIdle_ && (!settling_ || settlingOnLoop_); }
  const std::shared_ptr<HelperProcess>& Helper() const { return helper_; }
  // Milliseconds since the call in flight was sent; -1 when none (what deadlines measure).
  double RunningMs() const;
  // Holds `post` (a hand-off to the worker) until the call in flight has settled; runs it now
  // when none is.
  void Defer(std::function<void()> post);
  // Blocking (snapshotSync / readMemory asked while a call is in flight): waits up to
  // `timeoutMs` for the call's reply and settles it (its promise's reactions run later). False
  // when it did not end in time.
  bool Finish(Napi::Env env, double timeoutMs);
  // No call settles from now on (its Done and the deferred hand-offs are dropped unrun); the
  // handle is closed. Says what a call in flight left on the channel: the caller hands its reply
  // to the worker thread (as a worker call stuck at teardown is waited for there) or gives the
  // helper up.
  Left Close();
  // Closes once the call in flight (if any) has settled and its deferred hand-offs have run.
  void CloseWhenIdle();
  // The session's handle was garbage-collected (nothing can ask anything more): the call in
  // flight still settles and its deferred hand-offs (the session's shutdown) still run, then the
  // channel closes and deletes itself. Called instead of deleting it.
  void Orphan();

 private:
  struct Poll;
  static void OnPoll(uv_poll_t* handle, int status, int events);
  static void OnClosed(uv_handle_t* handle);
  static void OnEnvironmentCleanup(napi_async_cleanup_hook_handle hook, void* arg);
  // Reads what has arrived of the reply; true when the exchange has ended (`end_`, `error_` say
  // how).
  bool Step();
  // Ends the call: the hand-offs deferred while it was out, its Done, then those its Done asked
  // (unless its Done sent the next call: they wait for that one), then a close that waited for
  // it. `onLoop`: called from the poll callback, not inside a blocking call.
  void Settle(Napi::Env env, bool onLoop);
  // Hands the deferred calls to the worker, in order.
  void PostDeferred();
  bool Open();
  void Watch(int events);
  // Blocks until the exchange ends (true) or `timeoutMs` passes (false).
  bool WaitForEnd(double timeoutMs);
  static void ClosePoll(Poll* poll);
  // Closed for good: no Done, no deferred hand-off runs; the handle is closed.
  void Release();
  // The environment's async cleanup hook: the handle is closed; the call in flight stays for
  // Close() to report (the session's own cleanup hook decides about it).
  void ReleaseForTeardown();

  napi_env env_;
  std::shared_ptr<HelperProcess> helper_;
  Poll* poll_ = nullptr;  // null until the first call and after Close
  int watching_ = 0;      // the events the started handle watches; 0 when stopped
  std::unique_ptr<Napi::AsyncContext> context_;
  bool closed_ = false;
  bool closeWhenIdle_ = false;
  bool orphaned_ = false;  // owned by nobody: deletes itself once closed
  bool busy_ = false;      // a request is out and its reply not yet in
  bool settling_ = false;  // the reply is in; its Done and the deferred hand-offs are running
  bool settlingOnLoop_ = false;  // ... from the poll callback (its Done may send the next call)
  long long sentNs_ = -1;
  char header_[4];
  size_t headerRead_ = 0;
  std::string reply_;
  size_t replyRead_ = 0;
  End end_ = End::kReply;
  int error_ = 0;
  Done done_;
  std::deque<std::function<void()>> deferred_;
};

}  // namespace gpugate
