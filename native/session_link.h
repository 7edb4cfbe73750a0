// What a session's JavaScript side and its NVML thread share: the promise hand-off (Link, one
// per session, with its thread-safe function), a pending promise's Completion, and the guard that
// keeps every exception of an NVML task inside it. Used by session_api.cc and, for the calls the
// JavaScript thread sends to the helper itself, by the direct path there (direct_call.h).
#pragma once

#include <napi.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "helper_client.h"
#include "worker.h"

namespace gpugate {

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

}  // namespace gpugate
