// The JavaScript thread's own exchanges with the helper (see direct_call.h).
#include "direct_call.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "frame_io.h"
#include "helper_protocol.h"

namespace gpugate {

static_assert(kFirstReadBytes <= PIPE_BUF, "a request the JavaScript thread writes must go into the pipe whole");

// Outlives its DirectChannel until libuv has closed the handle.
struct DirectChannel::Poll {
  uv_poll_t handle;
  std::shared_ptr<HelperProcess> helper;  // keeps the descriptor open while libuv watches it
  DirectChannel* owner = nullptr;         // null once closed
  napi_async_cleanup_hook_handle hook = nullptr;
  bool closing = false;
};

DirectChannel::DirectChannel(napi_env env, std::shared_ptr<HelperProcess> helper) : env_(env), helper_(std::move(helper)) {}

DirectChannel::~DirectChannel() { Close(); }

bool DirectChannel::Open() {
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env_, &loop) != napi_ok || loop == nullptr) return false;
  auto* poll = new Poll;
  // The reply pipe's end is non-blocking already (helper_client.cc); the worker's waits poll it.
  if (uv_poll_init(loop, &poll->handle, helper_->ReplyEnd()) != 0) {
    delete poll;
    return false;
  }
  poll->handle.data = poll;
  poll->helper = helper_;
  poll->owner = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(&poll->handle));
  if (napi_add_async_cleanup_hook(env_, OnEnvironmentCleanup, poll, &poll->hook) != napi_ok) poll->hook = nullptr;
  poll_ = poll;
  try {
    context_ = std::make_unique<Napi::AsyncContext>(env_, "gpugate-nvml-helper");
  } catch (...) {
    Close();
    return false;
  }
  return true;
}

bool DirectChannel::Send(const std::string& request, Done done) {
  if (!TakesCall()) return false;
  if (poll_ == nullptr && !Open()) return false;
  // A frame of at most PIPE_BUF bytes goes into the pipe whole or not at all (POSIX), so a call
  // is never left half sent; a larger request goes by the worker.
  if (kFrameHeaderBytes + request.size() > kFirstReadBytes) return false;
  const std::string frame = EncodeFrame(request);
  const long long startedNs = MonotonicNs();
  long sent;
  do sent = WriteQuietly(helper_->RequestEnd(), frame.data(), frame.size(), helper_->QuietPipe());
  while (sent < 0 && errno == EINTR);
  if (sent != static_cast<long>(frame.size())) return false;  // nothing written: the worker's exchange meets whatever kept it out
  headerRead_ = 0;
  replyRead_ = 0;
  reply_.clear();
  error_ = 0;
  busy_ = true;
  sentNs_ = startedNs;
  done_ = std::move(done);
  Watch(UV_READABLE);
  return true;
}

// The handle stays started between calls (unreferenced), so a call costs no epoll change.
void DirectChannel::Watch(int events) {
  if (watching_ != events) {
    uv_poll_start(&poll_->handle, events, OnPoll);
    watching_ = events;
  }
  uv_ref(reinterpret_cast<uv_handle_t*>(&poll_->handle));
}

double DirectChannel::RunningMs() const {
  if (!busy_) return -1;
  const long long elapsed = MonotonicNs() - sentNs_;
  return elapsed > 0 ? static_cast<double>(elapsed) / 1e6 : 0;
}

bool DirectChannel::Step() {
  const int fd = helper_->ReplyEnd();
  for (;;) {
    const bool inHeader = headerRead_ < sizeof header_;
    if (!inHeader && replyRead_ == reply_.size()) {  // an empty reply
      end_ = End::kReply;
      return true;
    }
    // In the header, one read takes it and as much of the reply as has arrived (frame_io.h).
    char first[kFirstReadBytes];
    char* into = inHeader ? first : &reply_[0] + replyRead_;
    const size_t wanted = inHeader ? sizeof first : reply_.size() - replyRead_;
    const ssize_t got = read(fd, into, wanted);
    if (got == 0) {
      end_ = End::kClosed;
      return true;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      error_ = errno;
      end_ = errno == ECONNRESET ? End::kClosed : End::kFailed;
      return true;
    }
    if (!inHeader) {
      replyRead_ += static_cast<size_t>(got);
      if (replyRead_ < reply_.size()) continue;
      end_ = End::kReply;
      return true;
    }
    const size_t toHeader = std::min(static_cast<size_t>(got), sizeof header_ - headerRead_);
    std::memcpy(header_ + headerRead_, first, toHeader);
    headerRead_ += toHeader;
    const size_t arrived = static_cast<size_t>(got) - toHeader;
    if (headerRead_ < sizeof header_) continue;
    uint32_t length = 0;
    std::memcpy(&length, header_, sizeof length);
    if (length > kMaxFrameBytes || arrived > length) {
      error_ = length > kMaxFrameBytes ? EMSGSIZE : EPROTO;
      end_ = End::kFailed;
      return true;
    }
    reply_.assign(first + toHeader, arrived);
    reply_.resize(length);
    replyRead_ = arrived;
  }
}

void DirectChannel::Orphan() {
  orphaned_ = true;
  if (closed_ || !Busy()) {
    delete this;  // closes
    return;
  }
  closeWhenIdle_ = true;
}

void DirectChannel::OnPoll(uv_poll_t* handle, int status, int /*events*/) {
  auto* poll = static_cast<Poll*>(handle->data);
  DirectChannel* self = poll->owner;
  if (self == nullptr) return;
  if (!self->busy_) {
    // Readable while no call of ours is out: the worker's reply (it reads it itself) or the
    // helper's end (the next exchange meets it). Watched again by the next call.
    uv_poll_stop(handle);
    self->watching_ = 0;
    return;
  }
  if (status < 0) {
    self->error_ = -status;
    self->end_ = End::kFailed;
  } else if (!self->Step()) {
    return;
  }
  Napi::Env env(self->env_);
  self->Settle(env, true);
}

void DirectChannel::PostDeferred() {
  while (!deferred_.empty() && !closed_) {
    std::function<void()> post = std::move(deferred_.front());
    deferred_.pop_front();
    post();
  }
}

void DirectChannel::Settle(Napi::Env env, bool onLoop) {
  busy_ = false;
  settling_ = true;
  settlingOnLoop_ = onLoop;
  sentNs_ = -1;
  if (poll_ != nullptr) uv_unref(reinterpret_cast<uv_handle_t*>(&poll_->handle));
  Done done = std::move(done_);
  done_ = nullptr;
  std::string reply;
  reply.swap(reply_);
  // Nothing thrown may cross into libuv; the Done settles its promise itself. Then the calls
  // asked while this one was out go, in order, to the worker thread (after what the Done posts:
  // a failed call's hand-off names the failure they then meet), before anything this call's
  // promise's reactions ask.
  try {
    Napi::HandleScope handles(env);
    if (context_ != nullptr) {
      // Closing the scope runs the promise's reactions. On the loop, the next snapshot they ask
      // of an idle session is sent from here; anything else goes to the worker, and behind a
      // call they sent it is deferred until that one settles.
      Napi::CallbackScope scope(env, *context_);
      if (done) done(env, end_, reply, error_);
      PostDeferred();
    } else {
      if (done) done(env, end_, reply, error_);
      PostDeferred();
    }
  } catch (...) {
  }
  settling_ = false;
  settlingOnLoop_ = false;
  if (busy_) return;  // the reactions sent the next call: it settles what was asked behind it
  // Inside a blocking call the reactions' calls were held: to the worker, in order.
  PostDeferred();
  if (closeWhenIdle_ && !closed_) Close();
  if (orphaned_ && closed_) delete this;  // the last use of this object
}

void DirectChannel::Defer(std::function<void()> post) {
  if (busy_ || (settling_ && !settlingOnLoop_)) {
    deferred_.push_back(std::move(post));
  } else {
    post();
  }
}

bool DirectChannel::WaitForEnd(double timeoutMs) {
  const long long deadlineNs = MonotonicNs() + static_cast<long long>(timeoutMs * 1e6);
  for (;;) {
    if (Step()) return true;
    const long long leftNs = deadlineNs - MonotonicNs();
    if (leftNs <= 0) return false;
    pollfd watch{helper_->ReplyEnd(), POLLIN, 0};
    const long long leftMs = (leftNs + 999999) / 1000000;
    poll(&watch, 1, leftMs > 2147483647 ? 2147483647 : static_cast<int>(leftMs));
  }
}

bool DirectChannel::Finish(Napi::Env env, double timeoutMs) {
  if (!busy_) return true;
  if (!WaitForEnd(timeoutMs)) return false;
  Settle(env, false);
  return true;
}

void DirectChannel::CloseWhenIdle() {
  if (Busy()) {
    closeWhenIdle_ = true;
  } else {
    Close();
  }
}

DirectChannel::Left DirectChannel::Close() {
  const Left left = busy_ ? Left::kReply : Left::kNothing;
  busy_ = false;
  sentNs_ = -1;
  if (closed_) return left;  // ReleaseForTeardown ran
  Release();
  return left;
}

void DirectChannel::Release() {
  closed_ = true;
  settling_ = false;
  done_ = nullptr;
  deferred_.clear();
  if (poll_ != nullptr) {
    ClosePoll(poll_);
    poll_ = nullptr;
  }
  context_.reset();  // also at teardown: the cleanup hooks run inside the environment's context
}

void DirectChannel::ReleaseForTeardown() {
  Release();
  if (orphaned_) delete this;
}

void DirectChannel::ClosePoll(Poll* poll) {
  if (poll->closing) return;
  poll->closing = true;
  poll->owner = nullptr;
  uv_poll_stop(&poll->handle);
  uv_close(reinterpret_cast<uv_handle_t*>(&poll->handle), OnClosed);
}

void DirectChannel::OnClosed(uv_handle_t* handle) {
  auto* poll = static_cast<Poll*>(handle->data);
  if (poll->hook != nullptr) napi_remove_async_cleanup_hook(poll->hook);
  delete poll;
}

// The environment is being torn down (main thread or worker_threads) with the handle open.
void DirectChannel::OnEnvironmentCleanup(napi_async_cleanup_hook_handle /*hook*/, void* arg) {
  auto* poll = static_cast<Poll*>(arg);
  if (poll->owner != nullptr) {
    poll->owner->ReleaseForTeardown();
  } else {
    ClosePoll(poll);
  }
}

}  // namespace gpugate
