// The JavaScript face of a session (see session_api.h for what runs on which thread).
#include "session_api.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "direct_call.h"
#include "errors.h"
#include "helper_protocol.h"
#include "nvml_backend.h"
#include "records_js.h"
#include "session.h"
#include "session_link.h"
#include "worker.h"

namespace gpugate {

namespace {

void FinalizeFunction(napi_env /*env*/, void* data, void* /*hint*/) {
  auto* link = static_cast<std::shared_ptr<Link>*>(data);
  (*link)->Finalized();
  delete link;
}

Napi::Error SessionError(Napi::Env env, const std::string& code, const std::string& message);

// Settles `deferred` with what `outcome` builds (JavaScript thread). Nothing thrown here may cross
// into Node: a result that cannot be built (out of memory) rejects instead; if even that fails,
// the promise stays pending and its deadline reports it.
void SettleWith(Napi::Env env, const Napi::Promise::Deferred& deferred, const std::function<Settlement(Napi::Env)>& outcome) {
  try {
    Settlement settlement{false, Napi::Value()};
    try {
      settlement = outcome(env);
    } catch (const std::exception& error) {
      settlement = {false, SessionError(env, "GPUGATE_NATIVE_FAILURE", std::string("building the result failed: ") + error.what()).Value()};
    }
    if (settlement.resolved) {
      deferred.Resolve(settlement.value);
    } else {
      deferred.Reject(settlement.value);
    }
  } catch (...) {
  }
}

void CallCompletion(napi_env rawEnv, napi_value /*callback*/, void* /*context*/, void* data) {
  auto* completion = static_cast<Completion*>(data);
  // rawEnv is null when Node drains the queue of a function being torn down.
  if (rawEnv != nullptr && completion != nullptr && !completion->link->abandoned) {
    Napi::Env env(rawEnv);
    completion->link->Ended();
    SettleWith(env, completion->deferred, completion->outcome);
  }
  delete completion;
}

constexpr napi_type_tag kSessionTag = {0x6770756761746531ULL, 0x73657373696f6e31ULL};  // "gpugate1session1"

struct SessionHandle {
  napi_env env = nullptr;
  std::shared_ptr<NvmlBackend> backend;
  std::shared_ptr<Link> link = std::make_shared<Link>();
  std::shared_ptr<Worker> worker;  // shared: a close completion joins it after the handle may be gone
  std::unique_ptr<DirectChannel> direct;  // the helper mode's direct path, from its first call on
  bool openRequested = false;
  bool stopped = false;  // close(), abandon() or teardown ran: the worker takes no more work
  bool hookRegistered = false;
};

void StopForTeardown(SessionHandle* handle);

// Hands `task` to the worker thread; behind a direct call in flight, once it has settled (one
// request on the channel at a time, answered in the order asked). `stop`: the last task.
void Submit(SessionHandle* handle, Worker::Task task, bool stop = false) {
  std::shared_ptr<Worker> worker = handle->worker;
  auto post = [worker, task = std::move(task), stop]() mutable {
    worker->Post(std::move(task));
    if (stop) worker->Stop();
  };
  if (handle->direct != nullptr) {
    handle->direct->Defer(std::move(post));
  } else {
    post();
  }
}

// Teardown: closes the direct path; a reply still to come is left to the worker thread, which
// reads it before the tasks queued after this (as a worker call in flight would end there).
void CloseDirectPath(SessionHandle* handle) {
  if (handle->direct == nullptr) return;
  switch (handle->direct->Close()) {
    case DirectChannel::Left::kNothing:
      break;
    case DirectChannel::Left::kReply: {
      std::shared_ptr<HelperProcess> helper = handle->direct->Helper();
      handle->worker->Post([helper] { helper->DiscardReply(); });
      break;
    }
  }
}

void OnEnvironmentCleanup(void* arg) {
  auto* handle = static_cast<SessionHandle*>(arg);
  handle->hookRegistered = false;
  StopForTeardown(handle);
}

void RemoveHook(SessionHandle* handle) {
  if (handle->hookRegistered) {
    napi_remove_env_cleanup_hook(handle->env, OnEnvironmentCleanup, handle);
    handle->hookRegistered = false;
  }
}

// Environment teardown: shut NVML down if the worker answers promptly; otherwise leave a stuck
// thread detached rather than freeze the exit. The thread-safe function dies with the
// environment; its finalizer makes the link refuse every later delivery.
void StopForTeardown(SessionHandle* handle) {
  if (handle->stopped) return;
  handle->stopped = true;
  CloseDirectPath(handle);
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  handle->worker->Post([backend, done] {
    Guarded([&] { backend->Shutdown(); });
    done->set_value();
  });
  handle->worker->Stop();
  if (finished.wait_for(std::chrono::milliseconds(1000)) == std::future_status::ready) {
    handle->worker->Join();
  } else {
    handle->worker->Detach();
  }
}

// Garbage collection of a session never closed (the environment lives on): shut NVML down on
// the worker after its pending work, without blocking the collector; the thread then ends and
// releases the thread-safe function itself, so pending promises still settle.
void FinalizeHandle(Napi::Env /*env*/, SessionHandle* handle) {
  RemoveHook(handle);
  if (!handle->stopped) {
    handle->stopped = true;
    std::shared_ptr<NvmlBackend> backend = handle->backend;
    Submit(handle, [backend] { Guarded([&] { backend->Shutdown(); }); }, true);  // behind a direct call in flight
    handle->worker->Detach();
  }
  // A direct call in flight still settles; the channel then closes itself.
  if (handle->direct != nullptr) handle->direct.release()->Orphan();
  delete handle;
}

[[noreturn]] void ThrowType(Napi::Env env, const std::string& message) {
  throw Napi::TypeError::New(env, "gpugate: " + message);
}

SessionHandle* HandleArg(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal() || !info[0].As<Napi::External<SessionHandle>>().CheckTypeTag(&kSessionTag)) {
    ThrowType(env, "argument 'handle' must be a session handle returned by createSession()");
  }
  return info[0].As<Napi::External<SessionHandle>>().Data();
}

Napi::Error SessionError(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, "gpugate: " + message);
  error.Set("code", Napi::String::New(env, code));
  return error;
}

// A task's failure as the error its promise rejects with (`context` prefixes an unexpected one).
Napi::Error ThrownError(Napi::Env env, const Thrown& thrown, const std::string& context) {
  if (thrown.code == "GPUGATE_NATIVE_FAILURE") return SessionError(env, thrown.code, context + thrown.message);
  return SessionError(env, thrown.code, thrown.message);
}

long long SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What is left of a blocking call's `timeoutMs` since `startedNs` (at least 0).
double TimeLeftMs(double timeoutMs, long long startedNs) {
  const double left = timeoutMs - static_cast<double>(SteadyNs() - startedNs) / 1e6;
  return left > 0 ? left : 0;
}

SessionHandle* OpenHandleArg(const Napi::CallbackInfo& info) {
  SessionHandle* handle = HandleArg(info);
  if (handle->stopped || !handle->backend->Opened()) {
    throw SessionError(info.Env(), "GPUGATE_SESSION_CLOSED", "the NVML session is not open (closed, poisoned or never opened)");
  }
  return handle;
}

bool BoolArg(const Napi::CallbackInfo& info, size_t position, const char* name) {
  if (info.Length() <= position || info[position].IsUndefined()) return false;
  if (!info[position].IsBoolean()) ThrowType(info.Env(), std::string("argument '") + name + "' must be a boolean");
  return info[position].As<Napi::Boolean>().Value();
}

// Required: the deadline's default is the TypeScript session's (src/nvml/call-timeout.ts).
double TimeoutArg(const Napi::CallbackInfo& info, size_t position, const char* name) {
  if (info.Length() <= position || !info[position].IsNumber()) {
    ThrowType(info.Env(), std::string("argument '") + name + "' must be a number of milliseconds");
  }
  const double value = info[position].As<Napi::Number>().DoubleValue();
  if (!(value >= 0) || value > 2147483647.0) {
    throw Napi::RangeError::New(info.Env(), std::string("gpugate: argument '") + name + "' must be between 0 and 2147483647 ms");
  }
  return value;
}

// `computeModeAt`: where the optional computeMode flag sits (after the call's other arguments).
SnapshotRequest RequestArgs(const Napi::CallbackInfo& info, const SessionHandle* handle, size_t computeModeAt) {
  Napi::Env env = info.Env();
  SnapshotRequest request;
  request.processes = BoolArg(info, 1, "processes");
  request.memoryOnly = BoolArg(info, 2, "memoryOnly");
  request.computeMode = BoolArg(info, computeModeAt, "computeMode");
  if (info.Length() > 3 && !info[3].IsNull() && !info[3].IsUndefined()) {
    if (!info[3].IsArray()) ThrowType(env, "argument 'devices' must be an array of device indices or null");
    Napi::Array devices = info[3].As<Napi::Array>();
    const size_t count = handle->backend->DeviceCount();
    request.allDevices = false;
    for (uint32_t i = 0; i < devices.Length(); ++i) {
      Napi::Value entry = devices.Get(i);
      const double value = entry.IsNumber() ? entry.As<Napi::Number>().DoubleValue() : -1;
      if (!entry.IsNumber() || value < 0 || value >= static_cast<double>(count) || value != static_cast<unsigned>(value)) {
        throw Napi::RangeError::New(env, "gpugate: argument 'devices' entry " + std::to_string(i) + " (" +
                                             entry.ToString().Utf8Value() + ") is not a device index 0.." +
                                             std::to_string(count == 0 ? 0 : count - 1) + " of this session");
      }
      request.devices.push_back(static_cast<unsigned>(value));
    }
  }
  return request;
}

std::string StringArg(const Napi::CallbackInfo& info, size_t position, const char* name, bool nullable) {
  if (nullable && (info.Length() <= position || info[position].IsNull() || info[position].IsUndefined())) return "";
  if (info.Length() <= position || !info[position].IsString()) {
    ThrowType(info.Env(), std::string("argument '") + name + "' must be a string" + (nullable ? " or null" : ""));
  }
  return info[position].As<Napi::String>().Utf8Value();
}

// Locks the session's NVML mutex for a blocking call, or throws GPUGATE_TIMEOUT; `waitedMs`: what
// the call already waited for a direct call in flight (one wait of `timeoutMs` in all).
std::unique_lock<std::timed_mutex> LockForSyncCall(Napi::Env env, NvmlBackend& backend, double timeoutMs, const char* what,
                                                   double waitedMs = 0) {
  std::unique_lock<std::timed_mutex> lock(backend.Mutex(), std::defer_lock);
  const double leftMs = timeoutMs > waitedMs ? timeoutMs - waitedMs : 0;
  if (!lock.try_lock_for(std::chrono::milliseconds(static_cast<long long>(leftMs)))) {
    throw SessionError(env, "GPUGATE_TIMEOUT",
                       std::string(what) + " waited " + std::to_string(static_cast<long long>(timeoutMs)) +
                           " ms for the session's NVML thread, which is still inside an earlier call");
  }
  return lock;
}

// A blocking call asked while a direct call is in flight waits for its reply, as it waits for
// the worker's call (LockForSyncCall), and throws GPUGATE_TIMEOUT the same way. Returns the
// milliseconds it waited.
double WaitForDirectCall(Napi::Env env, SessionHandle* handle, double timeoutMs, const char* what) {
  if (handle->direct == nullptr || !handle->direct->Busy()) return 0;
  const long long startedNs = SteadyNs();
  if (handle->direct->Finish(env, timeoutMs)) return static_cast<double>(SteadyNs() - startedNs) / 1e6;
  throw SessionError(env, "GPUGATE_TIMEOUT",
                     std::string(what) + " waited " + std::to_string(static_cast<long long>(timeoutMs)) +
                         " ms for the session's NVML thread, which is still inside an earlier call");
}

Settlement SnapshotOutcome(Napi::Env env, const EncodedSnapshot& encoded, bool opened, const Thrown& thrown) {
  if (thrown.Any()) return {false, ThrownError(env, thrown, "the snapshot failed in the addon: ").Value()};
  if (opened) return {true, EncodedToJs(env, encoded)};
  return {false, SessionError(env, "GPUGATE_SESSION_CLOSED", "the NVML session was closed").Value()};
}

// The helper mode's direct path (direct_call.h): a snapshot that finds the session idle (no
// promise of the worker's pending, nothing in flight on the channel) is sent by this thread and
// its reply read here. False when it did not go that way (the caller queues it on the worker).
bool SendDirect(SessionHandle* handle, const SnapshotRequest& request, const Napi::Promise::Deferred& deferred) {
  if (handle->link->pending != 0 || (handle->direct != nullptr && !handle->direct->TakesCall())) return false;
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  std::shared_ptr<HelperProcess> helper = backend->DirectHelper();
  if (helper == nullptr) return false;
  if (handle->direct == nullptr) {
    handle->direct = std::make_unique<DirectChannel>(handle->env, helper);
  }
  std::shared_ptr<Link> link = handle->link;
  std::shared_ptr<Worker> worker = handle->worker;
  return handle->direct->Send(EncodeSnapshotRequest(request), [backend, helper, link, worker, deferred](
                                                                  Napi::Env env, DirectChannel::End end, const std::string& reply, int error) {
    if (link->abandoned) return;
    if (end == DirectChannel::End::kReply) {
      EncodedSnapshot encoded;
      const Thrown thrown = Guarded([&] { DecodeSnapshotReply(reply, &encoded); });
      SettleWith(env, deferred, [&](Napi::Env env) { return SnapshotOutcome(env, encoded, true, thrown); });
      return;
    }
    // The channel ended: as after the worker's failed exchange, the helper is asked nothing more,
    // and its death is named on the worker thread by the same code (the reaping may wait).
    backend->DirectCallFailed();
    const bool posted = worker->Post([helper, link, deferred, error] {
      const Thrown thrown = Guarded([&] { helper->ChannelEnded("snapshot", error); });
      link->Deliver(new Completion{link, deferred, [thrown](Napi::Env env) { return SnapshotOutcome(env, EncodedSnapshot(), false, thrown); }});
    });
    if (posted) link->Began();
  });
}

}  // namespace

Napi::Value CreateSession(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto handle = std::make_unique<SessionHandle>();
  handle->env = env;
  // Where NVML runs: the helper process unless the caller asks for this process explicitly.
  const std::string mode = info.Length() == 0 || info[0].IsUndefined() ? "helper" : StringArg(info, 0, "nvmlProcess", false);
  if (mode != "helper" && mode != "in-process") {
    throw Napi::RangeError::New(env, "gpugate: argument 'nvmlProcess' must be 'helper' or 'in-process', got '" + mode + "'");
  }
  try {
    handle->backend = MakeBackend(mode == "helper");
  } catch (const CodedFailure& failure) {
    throw SessionError(env, failure.code, failure.what());
  }
  std::shared_ptr<Link> link = handle->link;
  link->env = env;
  auto* finalizeData = new std::shared_ptr<Link>(link);
  napi_status status = napi_create_threadsafe_function(env, nullptr, nullptr, Napi::String::New(env, "gpugate-nvml"), 0, 1,
                                                       finalizeData, FinalizeFunction, nullptr, CallCompletion,
                                                       &link->function);
  if (status != napi_ok) {
    delete finalizeData;
    throw Napi::Error::New(env, "gpugate: could not create the session's thread-safe function");
  }
  napi_unref_threadsafe_function(env, link->function);
  handle->worker = std::make_shared<Worker>([link] { link->Release(); });
  link->worker = handle->worker;
  SessionHandle* raw = handle.release();
  if (napi_add_env_cleanup_hook(env, OnEnvironmentCleanup, raw) == napi_ok) raw->hookRegistered = true;
  Napi::External<SessionHandle> external = Napi::External<SessionHandle>::New(env, raw, FinalizeHandle);
  external.TypeTag(&kSessionTag);
  return external;
}

Napi::Value OpenSession(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = HandleArg(info);
  const std::string path = StringArg(info, 1, "libraryPath", true);
  if (handle->openRequested || handle->stopped) {
    throw SessionError(env, "GPUGATE_SESSION_CLOSED", "open() may be called once per session handle");
  }
  handle->openRequested = true;
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  std::shared_ptr<Link> link = handle->link;
  Submit(handle, [backend, link, deferred, path] {
    auto failure = std::make_shared<OpenFailure>();
    auto opened = std::make_shared<OpenedSession>();
    const Thrown thrown = Guarded([&] { *failure = backend->Open(path, opened.get()); });
    link->Deliver(new Completion{link, deferred, [opened, failure, thrown](Napi::Env env) -> Settlement {
      if (thrown.Any()) return {false, ThrownError(env, thrown, "opening NVML failed in the addon: ").Value()};
      if (failure->kind == OpenFailure::kNone) return {true, OpenResultToJs(env, *opened)};
      return {false, OpenFailureToJs(env, *failure).Value()};
    }});
  });
  link->Began();  // after Post: a Post that throws leaves no reference behind
  return deferred.Promise();
}

Napi::Value Snapshot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = OpenHandleArg(info);
  SnapshotRequest request = RequestArgs(info, handle, 4);
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  if (SendDirect(handle, request, deferred)) return deferred.Promise();
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  std::shared_ptr<Link> link = handle->link;
  Submit(handle, [backend, link, deferred, request] {
    auto encoded = std::make_shared<EncodedSnapshot>();
    bool opened = false;
    const Thrown thrown = Guarded([&] {
      std::lock_guard<std::timed_mutex> lock(backend->Mutex());
      opened = backend->Opened();
      if (opened) backend->ReadSnapshot(request, encoded.get(), -1);
    });
    link->Deliver(new Completion{link, deferred, [encoded, opened, thrown](Napi::Env env) {
      return SnapshotOutcome(env, *encoded, opened, thrown);
    }});
  });
  link->Began();  // after Post: a Post that throws leaves no reference behind
  return deferred.Promise();
}

Napi::Value Health(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = OpenHandleArg(info);
  const size_t count = handle->backend->DeviceCount();
  const double value = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().DoubleValue() : -1;
  if (info.Length() < 2 || !info[1].IsNumber()) ThrowType(env, "argument 'device' must be a device index");
  if (value < 0 || value >= static_cast<double>(count) || value != static_cast<double>(static_cast<size_t>(value))) {
    throw Napi::RangeError::New(env, "gpugate: argument 'device' (" + info[1].ToString().Utf8Value() + ") is not a device index 0.." +
                                         std::to_string(count == 0 ? 0 : count - 1) + " of this session");
  }
  const size_t position = static_cast<size_t>(value);
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  std::shared_ptr<Link> link = handle->link;
  Submit(handle, [backend, link, deferred, position] {
    auto reading = std::make_shared<HealthReading>();
    bool opened = false;
    const Thrown thrown = Guarded([&] {
      std::lock_guard<std::timed_mutex> lock(backend->Mutex());
      opened = backend->Opened();
      if (opened) *reading = backend->ReadHealth(position);
    });
    link->Deliver(new Completion{link, deferred, [reading, opened, thrown](Napi::Env env) -> Settlement {
      if (thrown.Any()) return {false, ThrownError(env, thrown, "the health reading failed in the addon: ").Value()};
      if (opened) return {true, HealthToJs(env, *reading)};
      return {false, SessionError(env, "GPUGATE_SESSION_CLOSED", "the NVML session was closed").Value()};
    }});
  });
  link->Began();  // after Post: a Post that throws leaves no reference behind
  return deferred.Promise();
}

Napi::Value SnapshotSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = OpenHandleArg(info);
  SnapshotRequest request = RequestArgs(info, handle, 5);
  const double timeoutMs = TimeoutArg(info, 4, "lockTimeoutMs");
  EncodedSnapshot encoded;
  {
    const long long startedNs = SteadyNs();
    const double waitedMs = WaitForDirectCall(env, handle, timeoutMs, "snapshotSync");
    auto lock = LockForSyncCall(env, *handle->backend, timeoutMs, "snapshotSync", waitedMs);
    if (!handle->backend->Opened()) throw SessionError(env, "GPUGATE_SESSION_CLOSED", "the NVML session was closed");
    const Thrown thrown = Guarded([&] { handle->backend->ReadSnapshot(request, &encoded, TimeLeftMs(timeoutMs, startedNs)); });
    if (thrown.Any()) throw ThrownError(env, thrown, "snapshotSync failed in the addon: ");
  }
  return EncodedToJs(env, encoded);
}

Napi::Value ReadMemorySync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = OpenHandleArg(info);
  // One napi_get_typedarray_info call instead of IsTypedArray/TypedArrayType/ElementLength/Data.
  napi_typedarray_type type = napi_int8_array;
  size_t length = 0;
  void* data = nullptr;
  if (info.Length() < 2 || napi_get_typedarray_info(env, info[1], &type, &length, &data, nullptr, nullptr) != napi_ok ||
      type != napi_float64_array) {
    ThrowType(env, "argument 'out' must be a Float64Array");
  }
  const size_t count = handle->backend->DeviceCount();
  if (length < count * kMemorySlots) {
    throw Napi::RangeError::New(env, "gpugate: argument 'out' has " + std::to_string(length) + " elements; " +
                                         std::to_string(count * kMemorySlots) + " are needed (" +
                                         std::to_string(kMemorySlots) + " per device)");
  }
  const double timeoutMs = TimeoutArg(info, 2, "lockTimeoutMs");
  // Uncontended (the usual case): no clock read; contended: the timed wait as before. The time
  // the lock took is not taken off the helper's deadline: it is at most one more deadline.
  NvmlBackend& backend = *handle->backend;
  const double waitedMs = handle->direct != nullptr ? WaitForDirectCall(env, handle, timeoutMs, "readMemory") : 0;
  std::unique_lock<std::timed_mutex> lock(backend.Mutex(), std::try_to_lock);
  if (!lock.owns_lock()) lock = LockForSyncCall(env, backend, timeoutMs, "readMemory", waitedMs);
  if (!backend.Opened()) throw SessionError(env, "GPUGATE_SESSION_CLOSED", "the NVML session was closed");
  const Thrown thrown = Guarded([&] { backend.ReadAllMemory(static_cast<double*>(data), timeoutMs); });
  if (thrown.Any()) throw ThrownError(env, thrown, "readMemory failed in the addon: ");
  return Napi::Number::New(env, static_cast<double>(count));
}

Napi::Value CloseSession(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = HandleArg(info);
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  if (handle->stopped) {
    deferred.Resolve(env.Undefined());
    return deferred.Promise();
  }
  handle->stopped = true;
  RemoveHook(handle);
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  std::shared_ptr<Link> link = handle->link;
  std::shared_ptr<Worker> worker = handle->worker;
  Submit(
      handle,
      [backend, link, deferred, worker] {
        Guarded([&] { backend->Shutdown(); });
        link->Deliver(new Completion{link, deferred, [worker](Napi::Env env) -> Settlement {
          // The worker has delivered its last result and is ending: joining is immediate.
          worker->Join();
          return {true, env.Undefined()};
        }});
      },
      true);
  link->Began();
  if (handle->direct != nullptr) handle->direct->CloseWhenIdle();
  return deferred.Promise();
}

Napi::Value CurrentCall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = HandleArg(info);
  Napi::Object result = Napi::Object::New(env);
  const CallSite site = handle->backend->CurrentCall();
  result.Set("fn", !site.fn.empty() ? Napi::Value(Napi::String::New(env, site.fn)) : env.Null());
  result.Set("device", site.device >= 0 ? Napi::Value(Napi::Number::New(env, site.device)) : env.Null());
  if (site.helper.pid > 0) {
    Napi::Object helper = Napi::Object::New(env);
    helper.Set("pid", Napi::Number::New(env, site.helper.pid));
    helper.Set("state", NullableString(env, site.helper.state));
    helper.Set("wchan", NullableString(env, site.helper.wchan));
    helper.Set("commandLine", NullableString(env, site.helper.title));
    result.Set("helper", helper);
  }
  // A direct call in flight is the session's current call (nothing else runs meanwhile).
  const double runningMs = handle->direct != nullptr && handle->direct->RunningMs() >= 0 ? handle->direct->RunningMs()
                                                                                           : handle->worker->RunningMs();
  result.Set("runningMs", runningMs >= 0 ? Napi::Value(Napi::Number::New(env, runningMs)) : env.Null());
  return result;
}

// Also after close(): a close stuck behind a hung call is abandoned the same way.
Napi::Value AbandonSession(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SessionHandle* handle = HandleArg(info);
  if (handle->link->abandoned) return env.Undefined();
  RemoveHook(handle);
  handle->link->Abandon();
  // A direct call in flight is given up (the helper is killed below), with what was deferred
  // behind it, a close included.
  if (handle->direct != nullptr) handle->direct->Close();
  // The helper mode: the helper is killed and left to a detached reaper; the worker's wait on it ends.
  handle->backend->Abandon();
  if (!handle->stopped) {
    handle->stopped = true;
    std::shared_ptr<NvmlBackend> backend = handle->backend;
    // If the stuck call ever returns, the thread still pairs the init with its shutdown.
    handle->worker->Post([backend] { Guarded([&] { backend->Shutdown(); }); });
  }
  handle->worker->Stop();  // also when a close deferred behind a direct call was dropped above
  handle->worker->Detach();
  return env.Undefined();
}

}  // namespace gpugate
