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

#include "errors.h"
#include "nvml_backend.h"
#include "session.h"
#include "worker.h"

namespace gpugate {

namespace {

struct Link;

// How a promise settles: resolved or rejected with `value`.
struct Settlement {
  bool resolved;
  Napi::Value value;
};

// Settles one promise on the JavaScript thread. Created on the NVML thread, run and deleted on
// the JavaScript thread (or deleted unrun when the session was abandoned or its environment is
// gone). `outcome` builds the value; the promise is settled exactly once, here.
struct Completion {
  std::shared_ptr<Link> link;
  Napi::Promise::Deferred deferred;
  std::function<Settlement(Napi::Env)> outcome;
};

// Shared between the JavaScript side and the NVML thread; outlives either.
//
// Liveness: the thread-safe function is ref'd while at least one promise is pending, so a
// process awaiting a snapshot stays alive, and unref'd when none is. `pending` and `abandoned`
// are only touched on the JavaScript thread.
//
// Never into a dead or abandoned environment: `callable` (under `mutex`) is cleared when the
// session is abandoned (the function is released right then, from the JavaScript thread), when
// the NVML thread releases it at its end, and by the function's finalizer, which Node runs before
// freeing it (also when a worker_threads environment is torn down). The NVML thread calls or
// releases the function only under `mutex` with `callable` set, so a thread left behind in a hung
// call can return at any time later and find nothing to call.
struct Link {
  napi_threadsafe_function function = nullptr;
  napi_env env = nullptr;
  std::weak_ptr<Worker> worker;  // the session's NVML thread, told when a task has its answer
  unsigned pending = 0;
  bool abandoned = false;
  std::mutex mutex;
  bool callable = true;

  void Began() {
    if (pending++ == 0) napi_ref_threadsafe_function(env, function);
  }
  void Ended() {
    if (pending > 0 && --pending == 0) napi_unref_threadsafe_function(env, function);
  }
  // JavaScript thread: no completion of this session runs from now on.
  void Abandon() {
    abandoned = true;
    pending = 0;
    std::lock_guard<std::mutex> lock(mutex);
    if (!callable) return;
    callable = false;
    napi_unref_threadsafe_function(env, function);
    napi_release_threadsafe_function(function, napi_tsfn_release);
  }
  // NVML thread: hands a completion to the JavaScript thread, or deletes it.
  void Deliver(Completion* completion) {
    if (std::shared_ptr<Worker> running = worker.lock()) running->TaskAnswered();
    std::lock_guard<std::mutex> lock(mutex);
    if (!callable || napi_call_threadsafe_function(function, completion, napi_tsfn_nonblocking) != napi_ok) {
      delete completion;
    }
  }
  // NVML thread, after its last task.
  void Release() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!callable) return;
    callable = false;
    napi_release_threadsafe_function(function, napi_tsfn_release);
  }
  // The function's finalizer (JavaScript thread, before Node frees it).
  void Finalized() {
    std::lock_guard<std::mutex> lock(mutex);
    callable = false;
  }
};

void FinalizeFunction(napi_env /*env*/, void* data, void* /*hint*/) {
  auto* link = static_cast<std::shared_ptr<Link>*>(data);
  (*link)->Finalized();
  delete link;
}

Napi::Error SessionError(Napi::Env env, const std::string& code, const std::string& message);

void CallCompletion(napi_env rawEnv, napi_value /*callback*/, void* /*context*/, void* data) {
  auto* completion = static_cast<Completion*>(data);
  // rawEnv is null when Node drains the queue of a function being torn down.
  if (rawEnv != nullptr && completion != nullptr && !completion->link->abandoned) {
    Napi::Env env(rawEnv);
    completion->link->Ended();
    // Nothing thrown here may cross into Node: a result that cannot be built (out of memory)
    // rejects instead; if even that fails, the promise stays pending and its deadline reports it.
    try {
      Settlement settlement{false, Napi::Value()};
      try {
        settlement = completion->outcome(env);
      } catch (const std::exception& error) {
        settlement = {false, SessionError(env, "GPUGATE_NATIVE_FAILURE", std::string("building the result failed: ") + error.what()).Value()};
      }
      if (settlement.resolved) {
        completion->deferred.Resolve(settlement.value);
      } else {
        completion->deferred.Reject(settlement.value);
      }
    } catch (...) {
    }
  }
  delete completion;
}

// What a task's reading threw: a documented code (CodedFailure: a timeout, a crashed helper) or
// GPUGATE_NATIVE_FAILURE for anything else; `code` empty when nothing was thrown.
struct Thrown {
  std::string code;
  std::string message;
  bool Any() const { return !code.empty(); }
};

// Runs `read`, catching everything: no exception leaves an NVML task.
template <typename Read>
Thrown Guarded(Read&& read) {
  try {
    read();
    return {};
  } catch (const CodedFailure& failure) {
    return {failure.code, failure.what()};
  } catch (const std::exception& error) {
    return {"GPUGATE_NATIVE_FAILURE", error.what()[0] != '\0' ? error.what() : "a C++ exception"};
  } catch (...) {
    return {"GPUGATE_NATIVE_FAILURE", "a C++ exception"};
  }
}

constexpr napi_type_tag kSessionTag = {0x6770756761746531ULL, 0x73657373696f6e31ULL};  // "gpugate1session1"

struct SessionHandle {
  napi_env env = nullptr;
  std::shared_ptr<NvmlBackend> backend;
  std::shared_ptr<Link> link = std::make_shared<Link>();
  std::shared_ptr<Worker> worker;  // shared: a close completion joins it after the handle may be gone
  bool openRequested = false;
  bool stopped = false;  // close(), abandon() or teardown ran: the worker takes no more work
  bool hookRegistered = false;
};

void StopForTeardown(SessionHandle* handle);

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
    handle->worker->Post([backend] { Guarded([&] { backend->Shutdown(); }); });
    handle->worker->Stop();
    handle->worker->Detach();
  }
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

Napi::Value EncodedToJs(Napi::Env env, const EncodedSnapshot& encoded) {
  Napi::Float64Array numbers = Napi::Float64Array::New(env, encoded.numbers.size());
  if (!encoded.numbers.empty()) {
    std::memcpy(numbers.Data(), encoded.numbers.data(), encoded.numbers.size() * sizeof(double));
  }
  Napi::Array strings = Napi::Array::New(env, encoded.strings.size());
  for (size_t i = 0; i < encoded.strings.size(); ++i) strings.Set(static_cast<uint32_t>(i), encoded.strings[i]);
  Napi::Object result = Napi::Object::New(env);
  result.Set("numbers", numbers);
  result.Set("strings", strings);
  return result;
}

Napi::Value NullableString(Napi::Env env, const std::string& text) {
  return text.empty() ? env.Null() : Napi::String::New(env, text);
}

Napi::Object CallErrorToJs(Napi::Env env, const CallError& error) {
  Napi::Object object = Napi::Object::New(env);
  object.Set("field", error.field);
  object.Set("nvmlReturn", Napi::Number::New(env, error.code));
  object.Set("fn", error.symbol);
  object.Set("message", error.message);
  return object;
}

Napi::Object OpenResultToJs(Napi::Env env, const OpenedSession& opened) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("path", opened.path);
  result.Set("driverVersion", NullableString(env, opened.versions.driverVersion));
  result.Set("nvmlVersion", NullableString(env, opened.versions.nvmlVersion));
  result.Set("cudaDriverVersion", opened.versions.cudaDriverVersion < 0
                                      ? env.Null()
                                      : Napi::Number::New(env, opened.versions.cudaDriverVersion));
  Napi::Object variants = Napi::Object::New(env);
  for (int fn = 0; fn < kFnCount; ++fn) {
    if (fn == kSimLastError) continue;
    const std::string& symbol = opened.boundSymbols.at(static_cast<size_t>(fn));
    variants.Set(LogicalName(static_cast<Fn>(fn)), symbol.empty() ? env.Null() : Napi::Value(Napi::String::New(env, symbol)));
  }
  result.Set("variants", variants);
  Napi::Array devices = Napi::Array::New(env, opened.identities.size());
  uint32_t position = 0;
  for (const DeviceIdentity& identity : opened.identities) {
    Napi::Object device = Napi::Object::New(env);
    device.Set("index", identity.index);
    device.Set("name", identity.name);
    device.Set("uuid", identity.uuid);
    device.Set("pciBusId", identity.pciBusId);
    device.Set("minorNumber", std::isnan(identity.minorNumber) ? env.Null() : Napi::Number::New(env, identity.minorNumber));
    if (identity.computeCapabilityMajor >= 0) {
      Napi::Array capability = Napi::Array::New(env, 2);
      capability.Set(0u, identity.computeCapabilityMajor);
      capability.Set(1u, identity.computeCapabilityMinor);
      device.Set("computeCapability", capability);
    } else {
      device.Set("computeCapability", env.Null());
    }
    device.Set("recoveryAction", std::isnan(identity.recoveryAction) ? env.Null() : Napi::Number::New(env, identity.recoveryAction));
    device.Set("error", identity.hasError ? Napi::Value(CallErrorToJs(env, identity.error)) : env.Null());
    Napi::Array fieldErrors = Napi::Array::New(env, identity.fieldErrors.size());
    for (size_t i = 0; i < identity.fieldErrors.size(); ++i) {
      fieldErrors.Set(static_cast<uint32_t>(i), CallErrorToJs(env, identity.fieldErrors[i]));
    }
    device.Set("fieldErrors", fieldErrors);
    devices.Set(position++, device);
  }
  result.Set("devices", devices);
  return result;
}

Napi::Error OpenFailureToJs(Napi::Env env, const OpenFailure& failure) {
  std::string message = failure.message;
  if (!failure.symbol.empty() && failure.kind == OpenFailure::kNvml) message = failure.symbol + " failed: " + message;
  Napi::Error error = Napi::Error::New(env, "gpugate: " + message);
  const char* kind = failure.kind == OpenFailure::kLibraryNotFound   ? "library"
                     : failure.kind == OpenFailure::kFunctionNotFound ? "function"
                                                                      : "nvml";
  error.Set("kind", kind);
  error.Set("nvmlReturn", Napi::Number::New(env, failure.code));
  error.Set("fn", failure.symbol.empty() ? env.Null() : Napi::Value(Napi::String::New(env, failure.symbol)));
  Napi::Array attempts = Napi::Array::New(env, failure.attempts.size());
  for (size_t i = 0; i < failure.attempts.size(); ++i) {
    Napi::Object attempt = Napi::Object::New(env);
    attempt.Set("path", failure.attempts[i].candidate);
    attempt.Set("error", failure.attempts[i].error);
    attempts.Set(static_cast<uint32_t>(i), attempt);
  }
  error.Set("attempts", attempts);
  error.Set("simulatorError", NullableString(env, failure.simulatorError));
  return error;
}

std::string StringArg(const Napi::CallbackInfo& info, size_t position, const char* name, bool nullable) {
  if (nullable && (info.Length() <= position || info[position].IsNull() || info[position].IsUndefined())) return "";
  if (info.Length() <= position || !info[position].IsString()) {
    ThrowType(info.Env(), std::string("argument '") + name + "' must be a string" + (nullable ? " or null" : ""));
  }
  return info[position].As<Napi::String>().Utf8Value();
}

// Locks the session's NVML mutex for a blocking call, or throws GPUGATE_TIMEOUT.
std::unique_lock<std::timed_mutex> LockForSyncCall(Napi::Env env, NvmlBackend& backend, double timeoutMs, const char* what) {
  std::unique_lock<std::timed_mutex> lock(backend.Mutex(), std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(static_cast<long long>(timeoutMs)))) {
    throw SessionError(env, "GPUGATE_TIMEOUT",
                       std::string(what) + " waited " + std::to_string(static_cast<long long>(timeoutMs)) +
                           " ms for the session's NVML thread, which is still inside an earlier call");
  }
  return lock;
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
  handle->worker->Post([backend, link, deferred, path] {
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
  std::shared_ptr<NvmlBackend> backend = handle->backend;
  std::shared_ptr<Link> link = handle->link;
  handle->worker->Post([backend, link, deferred, request] {
    auto encoded = std::make_shared<EncodedSnapshot>();
    bool opened = false;
    const Thrown thrown = Guarded([&] {
      std::lock_guard<std::timed_mutex> lock(backend->Mutex());
      opened = backend->Opened();
      if (opened) backend->ReadSnapshot(request, encoded.get(), -1);
    });
    link->Deliver(new Completion{link, deferred, [encoded, opened, thrown](Napi::Env env) -> Settlement {
      if (thrown.Any()) return {false, ThrownError(env, thrown, "the snapshot failed in the addon: ").Value()};
      if (opened) return {true, EncodedToJs(env, *encoded)};
      return {false, SessionError(env, "GPUGATE_SESSION_CLOSED", "the NVML session was closed").Value()};
    }});
  });
  link->Began();  // after Post: a Post that throws leaves no reference behind
  return deferred.Promise();
}

static Napi::Value HealthToJs(Napi::Env env, const HealthReading& reading) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("index", reading.index);
  Napi::Object fields = Napi::Object::New(env);
  for (const HealthField& field : reading.fields) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("nvmlReturn", Napi::Number::New(env, field.code));
    entry.Set("fn", field.symbol);
    entry.Set("message", NullableString(env, field.message));
    Napi::Object values = Napi::Object::New(env);
    for (const auto& [name, value] : field.values) values.Set(name, Napi::Number::New(env, value));
    entry.Set("values", values);
    fields.Set(field.name, entry);
  }
  result.Set("fields", fields);
  return result;
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
  handle->worker->Post([backend, link, deferred, position] {
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
    auto lock = LockForSyncCall(env, *handle->backend, timeoutMs, "snapshotSync");
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
  std::unique_lock<std::timed_mutex> lock(backend.Mutex(), std::try_to_lock);
  if (!lock.owns_lock()) lock = LockForSyncCall(env, backend, timeoutMs, "readMemory");
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
  handle->worker->Post([backend, link, deferred, worker] {
    Guarded([&] { backend->Shutdown(); });
    link->Deliver(new Completion{link, deferred, [worker](Napi::Env env) -> Settlement {
      // The worker has delivered its last result and is ending: joining is immediate.
      worker->Join();
      return {true, env.Undefined()};
    }});
  });
  link->Began();
  handle->worker->Stop();
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
  const double runningMs = handle->worker->RunningMs();
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
  // The helper mode: the helper is killed and left to a detached reaper; the worker's wait on it ends.
  handle->backend->Abandon();
  if (!handle->stopped) {
    handle->stopped = true;
    std::shared_ptr<NvmlBackend> backend = handle->backend;
    // If the stuck call ever returns, the thread still pairs the init with its shutdown.
    handle->worker->Post([backend] { Guarded([&] { backend->Shutdown(); }); });
    handle->worker->Stop();
  }
  handle->worker->Detach();
  return env.Undefined();
}

}  // namespace gpugate
