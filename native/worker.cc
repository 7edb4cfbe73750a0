// The NVML worker thread (see worker.h for the lifecycle).
#include "worker.h"

#include <chrono>

namespace gpugate {

namespace {

long long SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RunContained(const Worker::Task& task) {
  try {
    if (task) task();
  } catch (...) {
    // Nothing to report to: an exception must not end the process through std::terminate.
  }
}

}  // namespace

Worker::Worker(Task onExit) : state_(std::make_shared<State>()) {
  thread_ = std::thread(&Worker::Run, state_, std::move(onExit));
}

Worker::~Worker() {
  Stop();
  if (thread_.joinable()) thread_.detach();
}

void Worker::Run(std::shared_ptr<State> state, Task onExit) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->wake.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) break;  // stopping and drained
      task = std::move(state->queue.front());
      state->queue.pop_front();
    }
    state->taskStartedNs.store(SteadyNs(), std::memory_order_relaxed);
    RunContained(task);
    state->taskStartedNs.store(-1, std::memory_order_relaxed);
  }
  RunContained(onExit);
}

bool Worker::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->stopping) return false;
    state_->queue.push_back(std::move(task));
  }
  state_->wake.notify_one();
  return true;
}

void Worker::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_one();
}

void Worker::Join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Worker::Detach() {
  if (thread_.joinable()) thread_.detach();
}

void Worker::TaskAnswered() { state_->taskStartedNs.store(-1, std::memory_order_relaxed); }

double Worker::RunningMs() const {
  const long long started = state_->taskStartedNs.load(std::memory_order_relaxed);
  if (started < 0) return -1;
  const long long elapsed = SteadyNs() - started;
  return elapsed > 0 ? static_cast<double>(elapsed) / 1e6 : 0;
}

}  // namespace gpugate
