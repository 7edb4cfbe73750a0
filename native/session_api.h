// The JavaScript face of a session: argument checks, promises, and the thread hand-off.
//
// What runs where: every function here is called on the JavaScript thread. createSession()
// starts the session's NVML worker thread; open/snapshot/close queue work on it and return a
// promise that the worker settles through one thread-safe function per session. That
// function is ref'd only while promises are pending (a process awaiting a snapshot stays
// alive) and unref'd when idle. snapshotSync/readMemory run on the calling thread under the
// session's NVML mutex (blocking, bounded only by the lock wait). abandon() poisons a session
// whose call missed its deadline: the stuck thread is detached, never joined, and the
// session never calls into JavaScript again (its thread-safe function is released at once;
// completions already queued are dropped), so a process, or a worker_threads environment,
// can end while the thread is stuck. An environment cleanup hook per session closes it at
// teardown (main thread or worker_threads): nvmlShutdown once if init succeeded, waiting at
// most briefly for the worker, detaching it if it is stuck. No C++ exception crosses into
// Node: a task that throws rejects its promise with GPUGATE_NATIVE_FAILURE. In the helper mode an
// awaited snapshot that finds the session idle is sent and its reply read by the JavaScript
// thread itself (direct_call.h), with what is asked meanwhile queued behind it in order.
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value CreateSession(const Napi::CallbackInfo& info);
Napi::Value OpenSession(const Napi::CallbackInfo& info);
Napi::Value Snapshot(const Napi::CallbackInfo& info);
Napi::Value SnapshotSync(const Napi::CallbackInfo& info);
Napi::Value ReadMemorySync(const Napi::CallbackInfo& info);
// health(handle, device): the health readings of one device (health.h), on the NVML thread.
Napi::Value Health(const Napi::CallbackInfo& info);
Napi::Value CloseSession(const Napi::CallbackInfo& info);
Napi::Value AbandonSession(const Napi::CallbackInfo& info);
// { fn, device, runningMs }: the NVML function the session's thread called last and the device
// it was reading (null when none): after a missed deadline, where the call is stuck; and how
// long the thread has been in its current task (null between tasks): what deadlines measure.
Napi::Value CurrentCall(const Napi::CallbackInfo& info);

}  // namespace gpugate
