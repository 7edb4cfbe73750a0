// The NVML worker thread: one per session, running every queued NVML task serially.
//
// Lifecycle (what runs where): the JavaScript thread posts tasks; the worker thread runs them
// in order, each delivering its own result back through the session's thread-safe function
// (see session_api.cc: a session that was abandoned, or whose environment is gone, delivers
// nothing). Stop() lets the queued tasks finish and then ends the thread, which runs `onExit`
// last; the caller either joins it (normal close: the last task has already answered) or
// detaches it (a call is stuck inside NVML and may never return; joining would freeze
// JavaScript, so the thread is left to end on its own or with the process). The queue state is
// shared with the thread, so a detached thread never touches a destroyed Worker. A task that
// throws is contained here (it never reaches std::terminate); tasks catch their own exceptions
// to report them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace gpugate {

class Worker {
 public:
  using Task = std::function<void()>;

  // Starts the thread; `onExit` runs on the worker thread after its last task.
  explicit Worker(Task onExit);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues a task; false once Stop() was called.
  bool Post(Task task);
  // No more tasks after this; the thread ends once the queue is empty.
  void Stop();
  void Join();
  void Detach();
  // Milliseconds since the thread started the task it is running now; -1 when it is between
  // tasks. Any thread may ask: this is what a call's deadline is measured against.
  double RunningMs() const;
  // Called by the running task right before it hands its answer to JavaScript: it no longer
  // counts as running, so whoever sees the answer never sees the task as still running (the
  // thread may be descheduled between the hand-off and the task's end).
  void TaskAnswered();

 private:
  struct State {
    mutable std::mutex mutex;
    std::condition_variable wake;
    std::deque<Task> queue;
    bool stopping = false;
    std::atomic<long long> taskStartedNs{-1};  // steady clock; -1 between tasks
  };
  static void Run(std::shared_ptr<State> state, Task onExit);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace gpugate
